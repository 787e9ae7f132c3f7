"""A fault-injecting HTTP proxy, on loopback, in front of the test HTTP server.

A request for `/fault/<spec>/<path>` is forwarded as `/<path>` to the upstream server, with the
fault `spec` describes applied; any other request is forwarded as it is. `spec` is a
comma-separated list of `key` or `key=value` items:

    status=<code>   answer <code> (500, 503, 429, …) instead of forwarding
    delay=<secs>    wait before forwarding
    hang            accept the request and never answer (until the client goes away)
    reset           close the connection with a TCP reset, answering nothing
    short           send the headers (the full Content-Length) and half the body, then close
    trim=<n>        drop the body's last n bytes and say so in Content-Length: a well-formed
                    response with the wrong content (must be caught by the reader, not returned)
    claim=<bytes>   declare the object <bytes> long (the total of a ranged response's
                    Content-Range, else the Content-Length) and send the real body (a hostile
                    server: the reader must not allocate what the header claims)
    n=<count>       fault only the first <count> requests of each path (default: every one)
    on=<text>       fault only paths containing <text> (no `/`: it ends the spec); `on=chunks`:
                    every key but metadata documents (zarr.json, .zarray, .zattrs, …)
    id=<text>       no effect; makes a spec (and its per-path counters) unique to one test

Each response closes its connection, so every retry is a new request the counters see.

Usage: python fault_proxy.py UPSTREAM_URL PORT_FILE
"""

import asyncio
import http.client
import socket
import struct
import sys
import urllib.parse
from collections import defaultdict

UPSTREAM = None
SEEN = defaultdict(int)
STATUS_TEXT = {429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}


def parse_spec(text):
    spec = {}
    for item in urllib.parse.unquote(text).split(","):
        if not item:
            continue
        key, _, value = item.partition("=")
        spec[key] = value
    return spec


def forward(method, path, headers, body):
    """The upstream's answer: (status, reason, headers, body)."""
    conn = http.client.HTTPConnection(UPSTREAM.hostname, UPSTREAM.port, timeout=30)
    try:
        keep = {k: v for k, v in headers.items() if k.lower() not in ("host", "connection")}
        conn.request(method, path, body=body or None, headers=keep)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, resp.reason, resp.getheaders(), data
    finally:
        conn.close()


def head_bytes(status, reason, headers):
    lines = [f"HTTP/1.1 {status} {reason}"]
    lines += [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def handle(reader, writer):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        writer.close()
        return
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip()] = v.strip()
    length = int(headers.get("Content-Length", "0") or 0)
    body = await reader.readexactly(length) if length else b""

    spec, path = {}, target
    if target.startswith("/fault/"):
        spec_text, _, rest = target[len("/fault/"):].partition("/")
        spec, path = parse_spec(spec_text), "/" + rest
    last = path.rstrip("/").rsplit("/", 1)[-1]
    if spec.get("on") == "chunks":
        faulty = last != "zarr.json" and not last.startswith(".")
    else:
        faulty = bool(spec) and spec.get("on", "") in path
    if faulty:
        key = (tuple(sorted(spec.items())), method, path)
        SEEN[key] += 1
        limit = spec.get("n")
        faulty = limit is None or SEEN[key] <= int(limit)

    try:
        if faulty and "delay" in spec:
            await asyncio.sleep(float(spec["delay"]))
        if faulty and "hang" in spec:
            await reader.read()  # until the client closes
            return
        if faulty and "reset" in spec:
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return
        if faulty and "status" in spec:
            code = int(spec["status"])
            text = f"injected fault {code}\n".encode()
            writer.write(head_bytes(code, STATUS_TEXT.get(code, "Fault"), [
                ("Content-Type", "text/plain"),
                ("Content-Length", str(len(text))),
                ("Connection", "close"),
            ]) + text)
            await writer.drain()
            return
        status, reason, up_headers, data = await asyncio.to_thread(
            forward, method, path, headers, body)
        out = [(k, v) for k, v in up_headers
               if k.lower() not in ("content-length", "connection", "transfer-encoding")]
        if faulty and "trim" in spec:
            data = data[: max(0, len(data) - int(spec["trim"]))]
        declared = len(data)
        if faulty and "claim" in spec:
            # The claimed size where the response states the object's size: the total of a
            # ranged response's Content-Range, else the Content-Length.
            ranged = [i for i, (k, _) in enumerate(out) if k.lower() == "content-range"]
            if ranged:
                k, v = out[ranged[0]]
                out[ranged[0]] = (k, v.rsplit("/", 1)[0] + "/" + spec["claim"])
            else:
                declared = int(spec["claim"])
        if faulty and "short" in spec:
            data = data[: len(data) // 2]
        out += [("Content-Length", str(declared)), ("Connection", "close")]
        writer.write(head_bytes(status, reason, out))
        if faulty and "short" in spec:
            # The headers first, as a server that fails mid-body sends them; then part of
            # the body, and the connection is cut.
            await writer.drain()
            await asyncio.sleep(0.05)
        if method != "HEAD":
            writer.write(data)
        await writer.drain()
        if faulty and "short" in spec:
            await asyncio.sleep(0.05)
            writer.transport.abort()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        if not writer.transport.is_closing():
            writer.close()


async def main():
    global UPSTREAM
    UPSTREAM = urllib.parse.urlsplit(sys.argv[1])
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    with open(sys.argv[2], "w") as f:
        f.write(str(port))
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())

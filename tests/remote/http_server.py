"""A static file server with HTTP Range support, for zarrow's HTTP store tests.

Serves a directory on 127.0.0.1 (loopback only) and prints the port it bound. Python's
http.server ignores Range headers; object_store's HTTP store reads shards by ranges, so this
adds single-range support (bytes=a-b, bytes=a-, bytes=-n), HEAD and ETags.

Usage: python http_server.py DIR [PORT_FILE]
"""

import functools
import http.server
import os
import re
import sys


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass

    def send_head(self):
        path = self.translate_path(self.path)
        if os.path.isdir(path) or not os.path.isfile(path):
            self.send_error(404, "not found")
            return None
        size = os.path.getsize(path)
        rng = self.headers.get("Range")
        start, end = 0, size - 1
        status = 200
        if rng:
            m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
            if not m or (m.group(1) == "" and m.group(2) == ""):
                self.send_error(416, "bad range")
                return None
            if m.group(1) == "":
                n = int(m.group(2))
                start, end = max(0, size - n), size - 1
            else:
                start = int(m.group(1))
                end = int(m.group(2)) if m.group(2) else size - 1
                end = min(end, size - 1)
            if start >= size or start > end:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.end_headers()
                return None
            status = 206
        f = open(path, "rb")
        f.seek(start)
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        mtime = os.path.getmtime(path)
        self.send_header("Last-Modified", self.date_time_string(int(mtime)))
        # As nginx and the object stores send one: object_store resumes a body cut short only
        # when the object has an ETag (so a resumed read cannot mix two versions).
        self.send_header("ETag", f'"{int(mtime):x}-{size:x}"')
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        self._remaining = end - start + 1
        return f

    def copyfile(self, source, outputfile):
        remaining = getattr(self, "_remaining", None)
        while remaining is None or remaining > 0:
            buf = source.read(65536 if remaining is None else min(65536, remaining))
            if not buf:
                break
            outputfile.write(buf)
            if remaining is not None:
                remaining -= len(buf)


def main():
    root = sys.argv[1]
    handler = functools.partial(RangeHandler, directory=root)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    port = server.server_address[1]
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            f.write(str(port))
    print(port, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

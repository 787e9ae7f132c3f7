#!/usr/bin/env bash
# Start the loopback servers zarrow's remote tests read from, and print `export` lines for them:
#   - an HTTP server with Range support serving tests/fixtures/data   (ZARROW_TEST_HTTP)
#   - moto's S3-compatible server with the fixtures in bucket zarrow-fixtures (ZARROW_TEST_S3)
#   - a fault-injecting proxy in front of the HTTP server (ZARROW_TEST_FAULT_PROXY; see
#     fault_proxy.py for the faults a request path asks for), and one in front of the S3
#     server (ZARROW_TEST_S3_FAULT_PROXY, used as the S3 endpoint)
# Both bind 127.0.0.1 only. Their PIDs go to $STATE/pids; `stop.sh` ends them.
# Usage: eval "$(bash tests/remote/start.sh)"
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
STATE="$ROOT/target/remote-servers"
VENV="$ROOT/.venv-remote"
mkdir -p "$STATE"
: >"$STATE/pids"

want="$(sha256sum "$HERE/requirements.txt" | cut -d' ' -f1)"
if [[ ! -x "$VENV/bin/python" || "$(cat "$VENV/.stamp" 2>/dev/null)" != "$want" ]]; then
    rm -rf "$VENV"
    python3 -m venv "$VENV" >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$HERE/requirements.txt" >&2
    echo "$want" >"$VENV/.stamp"
fi
PY="$VENV/bin/python"

wait_port() { # file
    for _ in $(seq 1 100); do [[ -s "$1" ]] && return 0; sleep 0.1; done
    echo "start.sh: server did not start" >&2; exit 1
}

rm -f "$STATE/http.port"
"$PY" "$HERE/http_server.py" "$ROOT/tests/fixtures/data" "$STATE/http.port" >/dev/null 2>"$STATE/http.log" &
echo $! >>"$STATE/pids"
wait_port "$STATE/http.port"
http_port="$(cat "$STATE/http.port")"

rm -f "$STATE/proxy.port"
"$PY" "$HERE/fault_proxy.py" "http://127.0.0.1:$http_port" "$STATE/proxy.port" >/dev/null 2>"$STATE/proxy.log" &
echo $! >>"$STATE/pids"
wait_port "$STATE/proxy.port"
proxy_port="$(cat "$STATE/proxy.port")"

s3_port="$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"
"$VENV/bin/moto_server" -H 127.0.0.1 -p "$s3_port" >"$STATE/moto.log" 2>&1 &
echo $! >>"$STATE/pids"
for _ in $(seq 1 100); do
    "$PY" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$s3_port/moto-api/')" 2>/dev/null && break
    sleep 0.2
done

# The same proxy in front of moto: S3 requests to http://127.0.0.1:$s3_proxy_port/fault/<spec>
# as the endpoint get the faults (moto does not check the SigV4 signature, which covers the
# path with its /fault/<spec> prefix).
rm -f "$STATE/s3proxy.port"
"$PY" "$HERE/fault_proxy.py" "http://127.0.0.1:$s3_port" "$STATE/s3proxy.port" >/dev/null 2>"$STATE/s3proxy.log" &
echo $! >>"$STATE/pids"
wait_port "$STATE/s3proxy.port"
s3_proxy_port="$(cat "$STATE/s3proxy.port")"

AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=us-east-1 "$PY" - "$s3_port" "$ROOT/tests/fixtures/data" >&2 <<'PYEOF'
import os, sys, boto3
port, root = sys.argv[1], sys.argv[2]
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1")
s3.create_bucket(Bucket="zarrow-fixtures")
n = 0
for dirpath, _, files in os.walk(root):
    for name in files:
        full = os.path.join(dirpath, name)
        key = os.path.relpath(full, root).replace(os.sep, "/")
        s3.upload_file(full, "zarrow-fixtures", key)
        n += 1
print(f"start.sh: uploaded {n} fixture files to s3://zarrow-fixtures on port {port}")
PYEOF

cat <<ENV
export ZARROW_TEST_HTTP=http://127.0.0.1:$http_port
export ZARROW_TEST_S3=s3://zarrow-fixtures
export ZARROW_TEST_FAULT_PROXY=http://127.0.0.1:$proxy_port
export ZARROW_TEST_S3_FAULT_PROXY=http://127.0.0.1:$s3_proxy_port
export AWS_ENDPOINT_URL=http://127.0.0.1:$s3_port
export AWS_ACCESS_KEY_ID=test
export AWS_SECRET_ACCESS_KEY=test
export AWS_DEFAULT_REGION=us-east-1
export AWS_ALLOW_HTTP=true
ENV

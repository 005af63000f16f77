#!/usr/bin/env bash
# `make serve` (start) and `make serve-stop` (stop): the captioning service as deployed, Ray
# Serve (serve/config.yaml) behind the nginx front door, on a Ray head of its own, so that
# stopping it stops exactly what it started and no other Ray of the user's.
#
# - Its Ray keeps its sessions under RUN (per checkout: /tmp/conceptual-serve-<hash>, a
#   short path, as Ray's sockets need); `stop` ends the processes whose command lines name it.
# - Token authentication, always: Ray turns it on for a head by itself when ~/.ray/auth_token
#   exists (then `serve deploy` without the mode failed with AuthenticationError), so the
#   mode is set here, with a token of this service's own (RUN/auth_token, 0600).
# - LOW_LATENCY=1: Ray's HAProxy ingress, through scripts/haproxy-loopback (its stats and
#   metrics on 127.0.0.1), its config and admin socket in RUN/haproxy (mode 0700).
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${SERVE_RUN_DIR:-/tmp/conceptual-serve-$(printf %s "$PWD" | sha1sum | cut -c1-8)}
say() { printf '\033[1m[serve]\033[0m %s\n' "$*"; }

stop() {
    pkill -TERM -f -- "$RUN/" 2>/dev/null || true
    for _ in $(seq 50); do
        pgrep -f -- "$RUN/" >/dev/null || { say "stopped its Ray and Serve ($RUN)"; return 0; }
        sleep 0.2
    done
    pkill -KILL -f -- "$RUN/" 2>/dev/null || true
    say "stopped its Ray and Serve ($RUN; some by SIGKILL)"
}

case "${1:-}" in
start)
    mkdir -p -m 700 "$RUN" && chmod 700 "$RUN"
    [ -s "$RUN/auth_token" ] || (umask 077 && .venv/bin/python -c \
        'import secrets; print(secrets.token_hex(32))' > "$RUN/auth_token")
    export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="$RUN/auth_token"
    if [ -n "${LOW_LATENCY:-}" ]; then
        mkdir -p -m 700 "$RUN/haproxy"
        export RAY_SERVE_ENABLE_HA_PROXY=1 RAY_SERVE_THROUGHPUT_OPTIMIZED=1 \
            RAY_SERVE_HAPROXY_BINARY_PATH="$PWD/scripts/haproxy-loopback" \
            RAY_SERVE_HAPROXY_CONFIG_FILE_LOC="$RUN/haproxy/haproxy.cfg" \
            RAY_SERVE_HAPROXY_SOCKET_PATH="$RUN/haproxy/admin.sock" \
            RAY_SERVE_HAPROXY_SERVER_STATE_BASE="$RUN/haproxy" \
            RAY_SERVE_HAPROXY_SERVER_STATE_FILE="$RUN/haproxy/server-state" \
            RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH="$RUN/haproxy/metrics.sock"
    fi
    trap stop EXIT  # Ctrl-C on the front door, or a step that fails: all of it stops
    .venv/bin/ray start --head --num-cpus "${NUM_CPUS:-2}" --temp-dir "$RUN/ray" \
        --port "${RAY_PORT:-6379}" --dashboard-port "${DASHBOARD_PORT:-8265}"
    .venv/bin/serve deploy -a "http://127.0.0.1:${DASHBOARD_PORT:-8265}" serve/config.yaml
    say "Ray's command line on this cluster: export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=$RUN/auth_token"
    say "Ctrl-C (or make serve-stop) stops the front door, Serve and this Ray, and nothing else"
    # shellcheck disable=SC2086  # FRONT_DOOR holds key=value words
    .venv/bin/python -m conceptual.serve.front_door ${FRONT_DOOR:-}
    ;;
stop)
    stop
    ;;
*)
    echo "usage: scripts/serve.sh start|stop" >&2
    exit 2
    ;;
esac

#!/usr/bin/env bash
# `make serve` (start) and `make serve-stop` (stop): the captioning service as deployed, Ray
# Serve (serve/config.yaml, or the file SERVE_CONFIG names) behind the nginx front door, on a
# Ray head of its own, so that stopping it stops exactly what it started and no other Ray of
# the user's.
#
# - The front door forwards to where that file's http_options have Serve listen, unless
#   FRONT_DOOR names an upstream= of its own.
# - Its Ray keeps its sessions under RUN (per checkout: /tmp/conceptual-<hash>, short enough
#   for HAProxy's sockets: `check_socket_paths`).
# - All it starts runs in one session of its own (`run`: Ray's daemons, Serve, HAProxy, and
#   the front door's nginx, which becomes the session's leader), whose id it records in
#   RUN/session; `stop` ends every process in that session, whatever its command line or
#   process group, and nothing else. A record of another boot, or whose id now leads
#   another process (a PID used again), is no one's.
# - Token authentication, always: Ray turns it on for a head by itself when ~/.ray/auth_token
#   exists (then `serve deploy` without the mode failed with AuthenticationError), so the
#   mode is set here, with a token of this service's own (RUN/auth_token, 0600).
# - One node, on loopback: Ray takes 127.0.0.1 as its node address only when it runs no
#   cluster (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0; `--node-ip-address 127.0.0.1` it replaces
#   by the machine's address), and then its GCS, raylet, agents, client server, dashboard
#   and Prometheus exporters all listen on 127.0.0.1 (with the machine's address, the
#   exporters listened on 0.0.0.0, unauthenticated).
# - LOW_LATENCY=1: Ray's HAProxy ingress, through scripts/haproxy-loopback (its stats and
#   metrics on 127.0.0.1), its config and admin socket in RUN/hap (mode 0700).
#
#   scripts/serve.sh env   # the environment `start` gives Ray, without starting anything
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${SERVE_RUN_DIR:-/tmp/conceptual-$(printf %s "$PWD" | sha1sum | cut -c1-6)}
SERVE_CONFIG=${SERVE_CONFIG:-serve/config.yaml}
BOOT=$(cat /proc/sys/kernel/random/boot_id)  # a session id recorded before a reboot is no one's
say() { printf '\033[1m[serve]\033[0m %s\n' "$*"; }

# HAProxy binds its admin socket as PATH.PID.tmp first, a unix socket's path holds 107 bytes,
# and Ray puts its node id (56 characters) between RUN/hap and the socket's name.
check_socket_paths() {
    local longest
    longest="$RUN/hap/$(printf '%056d' 0)/admin.sock.4194304.tmp"  # the kernel's largest PID
    if ((${#longest} > 107)); then
        echo "error: SERVE_RUN_DIR=$RUN is $((${#longest} - 107)) characters too long" \
            "for HAProxy's sockets (LOW_LATENCY=1)" >&2
        exit 2
    fi
}

ray_env() {
    export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="$RUN/auth_token" \
        RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
    if [ -n "${LOW_LATENCY:-}" ]; then
        check_socket_paths
        export RAY_SERVE_ENABLE_HA_PROXY=1 RAY_SERVE_THROUGHPUT_OPTIMIZED=1 \
            RAY_SERVE_HAPROXY_BINARY_PATH="$PWD/scripts/haproxy-loopback" \
            RAY_SERVE_HAPROXY_CONFIG_FILE_LOC="$RUN/hap/haproxy.cfg" \
            RAY_SERVE_HAPROXY_SOCKET_PATH="$RUN/hap/admin.sock" \
            RAY_SERVE_HAPROXY_SERVER_STATE_BASE="$RUN/hap" \
            RAY_SERVE_HAPROXY_SERVER_STATE_FILE="$RUN/hap/server-state" \
            RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH="$RUN/hap/metrics.sock"
    fi
}

# When process $1 started (clock ticks after boot): who holds a PID now.
started() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    # shellcheck disable=SC2086  # the fields after the command's name, which may hold anything
    set -- ${stat##*) }
    echo "${20}"
}

# The processes in session $1, zombies left out (they are gone, only not yet reaped); fails
# when there are none.
members() { ps -o pid=,stat= -s "$1" | awk '$2 !~ /^Z/ { print $1; found = 1 } END { exit !found }'; }

# The session RUN/session records, while it is still the one `start` began: of this boot,
# its leader gone or the very process recorded.
recorded() {
    local boot id since now
    read -r boot id since 2>/dev/null <"$RUN/session" && [ "$boot" = "$BOOT" ] || return 1
    if now=$(started "$id") && [ "$now" != "$since" ]; then return 1; fi
    echo "$id"
}

ends() { # whether session $1 has no process left within 10 s
    for _ in $(seq 50); do
        members "$1" >/dev/null || return 0
        sleep 0.2
    done
    return 1
}

stop() {
    local id how=""
    if ! id=$(recorded) || ! members "$id" >/dev/null; then
        rm -f "$RUN/session"
        say "nothing of make serve's is running ($RUN)"
        return 0
    fi
    # shellcheck disable=SC2046  # one PID a word
    kill -TERM $(members "$id") 2>/dev/null || true
    if ! ends "$id"; then
        # shellcheck disable=SC2046
        kill -KILL $(members "$id") 2>/dev/null || true
        ends "$id" || true  # a process in the kernel (a disk write) dies as it leaves it
        how="; some by SIGKILL"
    fi
    rm -f "$RUN/session"
    say "stopped its front door, Serve and Ray ($RUN$how)"
}

case "${1:-}" in
start)
    if id=$(recorded) && members "$id" >/dev/null; then
        echo "error: make serve is running already ($RUN): make serve-stop first" >&2
        exit 1
    fi
    if [ ! -r "$SERVE_CONFIG" ]; then  # before Ray starts, not after
        echo "error: SERVE_CONFIG=$SERVE_CONFIG cannot be read" >&2
        exit 2
    fi
    ray_env
    mkdir -p -m 700 "$RUN" && chmod 700 "$RUN"
    if [ -n "${LOW_LATENCY:-}" ]; then mkdir -p -m 700 "$RUN/hap"; fi
    [ -s "$RUN/auth_token" ] || (umask 077 && .venv/bin/python -c \
        'import secrets; print(secrets.token_hex(32))' >"$RUN/auth_token")
    # Ctrl-C, a closed terminal, a kill, or a step that fails: all of it stops.
    trap stop EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
    # setsid runs `run` in place (a background job of this shell leads no process group), so
    # its PID is the session's id.
    SERVE_RUN_DIR=$RUN setsid bash scripts/serve.sh run &
    echo "$BOOT $! $(started $!)" >"$RUN/session"
    wait $!
    ;;
run) # the session's leader: Ray's head, Serve, then, in this same process, the front door
    .venv/bin/ray start --head --num-cpus "${NUM_CPUS:-2}" --temp-dir "$RUN/ray" \
        --dashboard-host 127.0.0.1 --port "${RAY_PORT:-6379}" --dashboard-port "${DASHBOARD_PORT:-8265}"
    .venv/bin/serve deploy -a "http://127.0.0.1:${DASHBOARD_PORT:-8265}" "$SERVE_CONFIG"
    say "Ray's command line on this cluster: export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=$RUN/auth_token"
    say "Ctrl-C (or make serve-stop) stops the front door, Serve and this Ray, and nothing else"
    # shellcheck disable=SC2086  # FRONT_DOOR holds key=value words, an upstream= wins
    FRONT_DOOR_PREFIX="$RUN/front-door" exec .venv/bin/python -m conceptual.serve.front_door \
        "serve_config=$SERVE_CONFIG" ${FRONT_DOOR:-}
    ;;
stop)
    stop
    ;;
env)
    ray_env
    env | grep '^RAY_' | sort
    ;;
*)
    echo "usage: scripts/serve.sh start|stop|env" >&2
    exit 2
    ;;
esac

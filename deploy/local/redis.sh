#!/usr/bin/env bash
# A real Redis on 127.0.0.1, without Docker — for tests and local development.
#
#   deploy/local/redis.sh start    install Debian's redis-server if missing, start it, wait for PING
#   deploy/local/redis.sh stop     SIGTERM, SIGKILL after a timeout
#   deploy/local/redis.sh status   exit 0 when running and answering PING
#   deploy/local/redis.sh env      prints FOOTFALL_REDIS_URL=redis://127.0.0.1:<port>/0
#
# No persistence (--save "" --appendonly no): a restart starts empty.
# maxmemory 256mb with volatile-ttl: keys nearest to expiry are evicted rather
# than writes refused. Pid, log and working dir in deploy/local/.run/redis/.
#
# Environment:
#   FOOTFALL_LOCAL_REDIS_PORT   port (default 16379)
#   FOOTFALL_LOCAL_RUN_DIR      state folder instead of deploy/local/.run (its redis/ subfolder
#                               is used): a second Redis beside the first needs its own, and its own port
#
# Progress and errors go to stderr; only `env` and `status` write to stdout.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RUN="${FOOTFALL_LOCAL_RUN_DIR:-$HERE/.run}/redis"
PIDFILE="$RUN/redis.pid"
LOG="$RUN/redis.log"
HOST=127.0.0.1
PORT="${FOOTFALL_LOCAL_REDIS_PORT:-16379}"
START_TIMEOUT=20
STOP_TIMEOUT=10

say() { echo "redis.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }

usage() {
    sed -n '2,7p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

take_lock() {
    mkdir -p "$RUN"
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$RUN/.lock"
        flock -w 120 9 || die "could not take $RUN/.lock within 120 s"
    fi
}

running_pid() {
    [[ -f "$PIDFILE" ]] || return 1
    local pid
    pid="$(cat "$PIDFILE" 2>/dev/null)" || return 1
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "redis-server.*:$PORT" || return 1
    echo "$pid"
}

# PING without redis-cli (bash's /dev/tcp, in a subshell); true on +PONG.
ping_ok() {
    local reply
    reply="$(
        exec 2>/dev/null 3<>"/dev/tcp/$HOST/$PORT" || exit 1
        printf 'PING\r\n' >&3
        IFS= read -r -t 2 line <&3 && printf '%s' "$line"
    )" || return 1
    [[ "$reply" == "+PONG"* ]]
}

port_open() {
    (exec 2>/dev/null 3<>"/dev/tcp/$HOST/$PORT")
}

ensure_installed() {
    command -v redis-server >/dev/null 2>&1 && return 0
    local sudo=()
    if [[ $EUID -ne 0 ]]; then
        command -v sudo >/dev/null 2>&1 || die "redis-server is missing and installing it needs root (apt-get install redis-server)"
        sudo=(sudo -n)
    fi
    say "redis-server not found: installing Debian's redis-server with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    local apt=("${sudo[@]}" apt-get -y -q -o Dpkg::Use-Pty=0 install --no-install-recommends redis-server)
    if ! "${apt[@]}" </dev/null >&2; then
        say "install failed; running apt-get update first"
        "${sudo[@]}" apt-get -q update </dev/null >&2 || die "apt-get update failed"
        "${apt[@]}" </dev/null >&2 || die "apt-get install redis-server failed"
    fi
    command -v redis-server >/dev/null 2>&1 || die "redis-server still not on PATH after installing it"
}

cmd_start() {
    take_lock
    local pid t0=$SECONDS
    if pid="$(running_pid)" && ping_ok; then
        say "already running (pid $pid) on $HOST:$PORT"
        return 0
    fi
    if port_open; then
        die "port $HOST:$PORT is already in use by another process (set FOOTFALL_LOCAL_REDIS_PORT)"
    fi
    ensure_installed
    rm -f "$PIDFILE"
    if [[ -f "$LOG" ]]; then mv -f "$LOG" "$LOG.1"; fi
    # --daemonize: redis forks, detaches and writes the pid file itself.
    if ! redis-server --bind "$HOST" --port "$PORT" --protected-mode yes \
            --save "" --appendonly no --daemonize yes \
            --pidfile "$PIDFILE" --logfile "$LOG" --dir "$RUN" \
            --maxmemory 256mb --maxmemory-policy volatile-ttl \
            </dev/null >&2 9>&-; then
        [[ -f "$LOG" ]] && tail -n 30 "$LOG" >&2
        die "redis-server did not start"
    fi
    local deadline=$((SECONDS + START_TIMEOUT))
    until ping_ok; do
        if ((SECONDS >= deadline)); then
            say "no PONG on $HOST:$PORT within $START_TIMEOUT s; last lines of $LOG:"
            [[ -f "$LOG" ]] && tail -n 30 "$LOG" >&2
            exit 1
        fi
        sleep 0.1
    done
    pid="$(running_pid || echo '?')"
    say "ready (pid $pid, $(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')) on $HOST:$PORT after $((SECONDS - t0)) s"
}

cmd_stop() {
    take_lock
    local pid
    if ! pid="$(running_pid)"; then
        rm -f "$PIDFILE"
        say "not running"
        return 0
    fi
    say "stopping pid $pid"
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while running_pid >/dev/null; do
        if ((SECONDS >= deadline)); then
            say "still running after $STOP_TIMEOUT s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.2
            break
        fi
        sleep 0.1
    done
    rm -f "$PIDFILE"
}

cmd_status() {
    local pid
    if pid="$(running_pid)"; then
        if ping_ok; then
            echo "redis: running (pid $pid) on $HOST:$PORT"
            return 0
        fi
        echo "redis: process $pid is up but does not answer PING on $HOST:$PORT"
        return 1
    fi
    echo "redis: not running"
    return 3
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    env) echo "FOOTFALL_REDIS_URL=redis://$HOST:$PORT/0" ;;
    *) usage ;;
esac

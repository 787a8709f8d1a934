#!/usr/bin/env bash
# Start/stop the local Kafka and Redis that tests need, unless the caller
# already points at its own.
#
#   env_out="$(deploy/local/services.sh start)" || exit 1; eval "$env_out"
#   ... run the tests ...
#   deploy/local/services.sh stop
#
# start: for each of FOOTFALL_KAFKA_BOOTSTRAP and FOOTFALL_REDIS_URL that is
#   NOT set in the environment, starts the local service (kafka.sh / redis.sh
#   beside this file) and prints `export NAME=value` on stdout for the caller
#   to eval. A variable that is already set is left alone: nothing is started
#   for it and nothing is printed. Exits non-zero (printing no exports) if a
#   service fails to start; a service it had started by then is stopped again.
# stop: stops only what `start` started (recorded in .run/services.started),
#   whatever the environment says by then; a service that was already running
#   before `start` is left running.
#
# FOOTFALL_LOCAL_RUN_DIR (with the FOOTFALL_LOCAL_*_PORT variables) runs a second pair
# beside the first: its state, and the record of what `start` started, live there.
#
# Progress goes to stderr; stdout carries only the export lines.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STARTED="${FOOTFALL_LOCAL_RUN_DIR:-$HERE/.run}/services.started"

say() { echo "services.sh: $*" >&2; }

record() { # name
    mkdir -p "$(dirname "$STARTED")"
    grep -qx "$1" "$STARTED" 2>/dev/null || echo "$1" >>"$STARTED"
}

# start_one NAME VAR: starts deploy/local/NAME.sh unless $VAR is set; appends
# the export line to EXPORTS.
EXPORTS=()
NEWLY=()
start_one() {
    local name="$1" var="$2"
    if [[ -n "${!var:-}" ]]; then
        say "$var is set (${!var}): not starting the local $name"
        return 0
    fi
    local was_running=0
    if "$HERE/$name.sh" status >/dev/null 2>&1; then
        was_running=1
    fi
    if ! "$HERE/$name.sh" start >&2; then
        say "the local $name did not start"
        return 1
    fi
    if ((!was_running)); then
        record "$name"
        NEWLY+=("$name")
    fi
    EXPORTS+=("export $("$HERE/$name.sh" env)")
}

cmd_start() {
    local t0=$SECONDS
    if ! start_one redis FOOTFALL_REDIS_URL || ! start_one kafka FOOTFALL_KAFKA_BOOTSTRAP; then
        local n
        for n in "${NEWLY[@]}"; do
            "$HERE/$n.sh" stop >&2 || true
            sed -i "/^$n\$/d" "$STARTED" 2>/dev/null || true
        done
        exit 1
    fi
    local line
    for line in "${EXPORTS[@]}"; do
        echo "$line"
    done
    say "services ready in $((SECONDS - t0)) s"
}

cmd_stop() {
    if [[ ! -f "$STARTED" ]]; then
        say "nothing started by services.sh start; nothing to stop"
        return 0
    fi
    local name rc=0
    while read -r name; do
        case "$name" in
            kafka | redis) "$HERE/$name.sh" stop >&2 || rc=1 ;;
        esac
    done <"$STARTED"
    rm -f "$STARTED"
    return "$rc"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    *)
        sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac

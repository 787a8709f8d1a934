#!/usr/bin/env bash
# A real single-node Apache Kafka (KRaft: broker + controller in one JVM) on
# 127.0.0.1, without Docker — for tests and local development.
#
#   deploy/local/kafka.sh start          fetch the jars once (Maven), format once, start, wait until ready
#   deploy/local/kafka.sh stop [--wipe]  SIGTERM, SIGKILL after a timeout; --wipe also deletes the data
#   deploy/local/kafka.sh status         exit 0 when running and answering a Metadata request
#   deploy/local/kafka.sh env            prints FOOTFALL_KAFKA_BOOTSTRAP=127.0.0.1:<port>
#
# The Kafka version is pinned in deploy/local/kafka/pom.xml; its jars land in
# deploy/local/kafka/libs/ and the data, config, log and pid file in
# deploy/local/.run/kafka/ (both git-ignored). Data survive stop/start (tests
# stop the broker mid-run and start it again) unless `stop --wipe`.
#
# Environment:
#   FOOTFALL_LOCAL_RUN_DIR                state folder instead of deploy/local/.run (its kafka/
#                                         subfolder is used): a second broker beside the first
#                                         needs its own, plus its own ports
#   FOOTFALL_LOCAL_KAFKA_PORT             client port (default 19092)
#   FOOTFALL_LOCAL_KAFKA_CONTROLLER_PORT  controller port (default 19093)
#   FOOTFALL_LOCAL_KAFKA_START_TIMEOUT    seconds to wait for readiness (default 90)
#   FOOTFALL_LOCAL_KAFKA_STOP_TIMEOUT     seconds between SIGTERM and SIGKILL (default 30)
#   FOOTFALL_LOCAL_KAFKA_JAVA_OPTS        extra JVM options
#   JAVA_HOME                             Java 17+ (default: `java` on PATH)
#
# Progress and errors go to stderr; only `env` and `status` write to stdout.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KAFKA_DIR="$HERE/kafka"
LIBS="$KAFKA_DIR/libs"
RUN="${FOOTFALL_LOCAL_RUN_DIR:-$HERE/.run}/kafka"
DATA="$RUN/data"
CONF="$RUN/server.properties"
LOG="$RUN/server.log"
PIDFILE="$RUN/kafka.pid"
CLUSTER_ID_FILE="$RUN/cluster.id"

HOST=127.0.0.1
PORT="${FOOTFALL_LOCAL_KAFKA_PORT:-19092}"
CPORT="${FOOTFALL_LOCAL_KAFKA_CONTROLLER_PORT:-19093}"
START_TIMEOUT="${FOOTFALL_LOCAL_KAFKA_START_TIMEOUT:-90}"
STOP_TIMEOUT="${FOOTFALL_LOCAL_KAFKA_STOP_TIMEOUT:-30}"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"
PYTHON="${PYTHON:-python3}"

say() { echo "kafka.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }

usage() {
    sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

show_log_tail() {
    if [[ -f "$LOG" ]]; then
        say "last lines of $LOG:"
        tail -n "${1:-60}" "$LOG" >&2 || true
    fi
}

# One start/stop at a time (two pytest sessions, a developer and a test run...).
take_lock() {
    mkdir -p "$RUN"
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$RUN/.lock"
        flock -w 300 9 || die "could not take $RUN/.lock within 300 s"
    fi
}

# The pid in the pid file, if that process is alive and is our broker.
running_pid() {
    [[ -f "$PIDFILE" ]] || return 1
    local pid
    pid="$(cat "$PIDFILE" 2>/dev/null)" || return 1
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    # A zombie or a recycled pid has a different (or empty) command line.
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "kafka.Kafka $CONF" || return 1
    echo "$pid"
}

port_open() { # host port
    (exec 2>/dev/null 3<>"/dev/tcp/$1/$2")
}

# A real Metadata request (ApiVersions first, to pick a version the broker
# supports); succeeds when the broker answers with at least one live broker.
metadata_ok() {
    if ! command -v "$PYTHON" >/dev/null 2>&1; then
        # No Python: fall back on the broker's own "started" line.
        grep -q "Kafka Server started" "$LOG" 2>/dev/null && port_open "$HOST" "$PORT"
        return
    fi
    "$PYTHON" - "$HOST" "$PORT" <<'PY'
import socket, struct, sys

host, port = sys.argv[1], int(sys.argv[2])

def call(sock, api_key, version, corr, body):
    client = b"footfall-kafka.sh"
    header = struct.pack(">hhih", api_key, version, corr, len(client)) + client
    msg = header + body
    sock.sendall(struct.pack(">i", len(msg)) + msg)
    size = struct.unpack(">i", recv(sock, 4))[0]
    data = recv(sock, size)
    if struct.unpack(">i", data[:4])[0] != corr:
        raise RuntimeError("correlation id mismatch")
    return data[4:]

def recv(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise RuntimeError("connection closed")
        buf += chunk
    return buf

try:
    with socket.create_connection((host, port), timeout=3) as s:
        s.settimeout(3)
        # ApiVersions v0: error_code, [api_key, min, max]
        r = call(s, 18, 0, 1, b"")
        err, n = struct.unpack(">hi", r[:6])
        if err != 0:
            sys.exit(1)
        versions = {}
        for i in range(n):
            k, lo, hi = struct.unpack(">hhh", r[6 + 6 * i: 12 + 6 * i])
            versions[k] = (lo, hi)
        lo, hi = versions[3]
        v = max(lo, min(hi, 8))  # 4..8: non-flexible encoding
        if not 4 <= v <= 8:
            sys.exit(1)
        body = struct.pack(">i?", -1, False)  # all topics, no auto-creation
        if v >= 8:
            body += struct.pack(">??", False, False)
        r = call(s, 3, v, 2, body)
        throttle, brokers = struct.unpack(">ii", r[:8])
        sys.exit(0 if brokers >= 1 else 1)
except Exception:
    sys.exit(1)
PY
}

libs_ready() {
    local stamp
    stamp="$(sha256sum "$KAFKA_DIR/pom.xml" | cut -d' ' -f1)"
    [[ -f "$LIBS/.fetched" && "$(cat "$LIBS/.fetched")" == "$stamp" ]] || return 1
    compgen -G "$LIBS/kafka_2.13-*.jar" >/dev/null
}

fetch() {
    libs_ready && return 0
    command -v mvn >/dev/null 2>&1 || die "mvn (Apache Maven) is needed to fetch Kafka's jars once"
    local tmp="$HERE/.run/kafka-libs.tmp" t0=$SECONDS
    rm -rf "$tmp"
    say "fetching Apache Kafka jars with Maven into $LIBS (once) ..."
    # (sed: Maven 3.8 prints bare colour-reset codes even with -q -B)
    if ! (cd "$KAFKA_DIR" && mvn -q -B -Dstyle.color=never -f pom.xml dependency:copy-dependencies \
            -DincludeScope=runtime -DoutputDirectory="$tmp" 2>&1) | sed 's/\x1b\[[0-9;]*m//g' >&2; then
        rm -rf "$tmp"
        die "mvn could not fetch the jars pinned in $KAFKA_DIR/pom.xml"
    fi
    sha256sum "$KAFKA_DIR/pom.xml" | cut -d' ' -f1 >"$tmp/.fetched"
    rm -rf "$LIBS"
    mv "$tmp" "$LIBS"
    say "fetched $(ls "$LIBS" | grep -c '\.jar$') jars in $((SECONDS - t0)) s"
}

check_java() {
    command -v "$JAVA" >/dev/null 2>&1 || die "java not found (Kafka 4 needs Java 17+; set JAVA_HOME)"
    local v
    v="$("$JAVA" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)"
    [[ -n "$v" && "$v" -ge 17 ]] || die "Kafka 4 needs Java 17 or newer (found: ${v:-unknown}; set JAVA_HOME)"
}

write_config() {
    cat >"$CONF" <<EOF
# Generated by deploy/local/kafka.sh on every start; edit the script, not this file.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$CPORT
listeners=PLAINTEXT://$HOST:$PORT,CONTROLLER://$HOST:$CPORT
advertised.listeners=PLAINTEXT://$HOST:$PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$DATA

# Topics
num.partitions=4
auto.create.topics.enable=true
default.replication.factor=1
min.insync.replicas=1

# Internal topics: one replica, one partition (single node)
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=1

# Small machine, fast tests
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=2
num.recovery.threads.per.data.dir=1
# After a SIGKILL the old broker registration blocks the restart until its
# session expires (default 9 s): keep that short.
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=4000
log.retention.hours=24
EOF
}

format_storage() {
    [[ -f "$DATA/meta.properties" ]] && return 0
    mkdir -p "$DATA"
    # A Kafka Uuid: 16 random bytes, URL-safe base64 without padding. Like Kafka's own
    # Uuid.randomUuid, never one starting with "-": the format tool would read it as an option.
    while [[ ! -s "$CLUSTER_ID_FILE" || "$(head -c 1 "$CLUSTER_ID_FILE")" == "-" ]]; do
        head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n' >"$CLUSTER_ID_FILE"
    done
    say "formatting $DATA (cluster id $(cat "$CLUSTER_ID_FILE"))"
    local out
    if ! out="$("$JAVA" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
            -Dlog4j2.configurationFile="$KAFKA_DIR/log4j2.properties" \
            -cp "$LIBS/*" kafka.tools.StorageTool format \
            --cluster-id "$(cat "$CLUSTER_ID_FILE")" --config "$CONF" --ignore-formatted 2>&1)"; then
        echo "$out" >&2
        die "formatting the storage failed"
    fi
}

wait_ready() { # pid
    local pid="$1" deadline=$((SECONDS + START_TIMEOUT))
    while :; do
        if ! running_pid >/dev/null; then
            say "Kafka exited during start-up"
            show_log_tail 80
            return 1
        fi
        if metadata_ok; then
            return 0
        fi
        if ((SECONDS >= deadline)); then
            say "Kafka did not answer a Metadata request on $HOST:$PORT within $START_TIMEOUT s"
            show_log_tail 80
            stop_broker "$pid"
            return 1
        fi
        sleep 0.5
    done
}

stop_broker() { # pid
    local pid="$1" deadline=$((SECONDS + STOP_TIMEOUT))
    kill -TERM "$pid" 2>/dev/null || true
    while running_pid >/dev/null; do
        if ((SECONDS >= deadline)); then
            say "still running after $STOP_TIMEOUT s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.5
            break
        fi
        sleep 0.2
    done
    rm -f "$PIDFILE"
}

# A port inside the kernel's ephemeral range can be taken by a client's outgoing
# connection while the broker is down (fault tests restart it), and the restart then
# fails to bind. The defaults sit below the usual range (32768-60999).
warn_ephemeral() {
    local lo hi p
    read -r lo hi < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || return 0
    for p in "$PORT" "$CPORT"; do
        if ((p >= lo && p <= hi)); then
            say "warning: port $p is in the ephemeral range $lo-$hi; a restart may fail to bind it"
        fi
    done
}

cmd_start() {
    take_lock
    local pid t0=$SECONDS
    warn_ephemeral
    if pid="$(running_pid)"; then
        if metadata_ok; then
            say "already running (pid $pid) on $HOST:$PORT"
            return 0
        fi
        say "process $pid exists but does not answer yet; waiting"
        wait_ready "$pid" || exit 1
        return 0
    fi
    local p
    for p in "$PORT" "$CPORT"; do
        if port_open "$HOST" "$p"; then
            die "port $HOST:$p is already in use by another process (set FOOTFALL_LOCAL_KAFKA_PORT / FOOTFALL_LOCAL_KAFKA_CONTROLLER_PORT)"
        fi
    done
    check_java
    fetch
    write_config
    format_storage
    if [[ -f "$LOG" ]]; then mv -f "$LOG" "$LOG.1"; fi
    say "starting Kafka $(ls "$LIBS" | sed -n 's/^kafka_2.13-\(.*\)\.jar$/\1/p') on $HOST:$PORT (controller $CPORT)"
    # setsid: not in the caller's process group (Ctrl-C of a test run does not
    # kill it half-way); stdin/stdout/stderr detached so that `$(...)` callers
    # do not wait for the broker; fd 9 (the lock) is not inherited. The inner
    # shell writes its own pid to the pid file, then becomes the JVM.
    # shellcheck disable=SC2086
    setsid bash -c 'echo $$ >"$0"; exec "$@"' "$PIDFILE" \
        "$JAVA" -Xms256m -Xmx512m -XX:+UseSerialGC -XX:+ExitOnOutOfMemoryError \
        -Djava.awt.headless=true -Dlog4j2.shutdownHookEnabled=false \
        -Dlog4j2.configurationFile="$KAFKA_DIR/log4j2.properties" \
        -Dkafka.logs.dir="$RUN" \
        ${FOOTFALL_LOCAL_KAFKA_JAVA_OPTS:-} \
        -cp "$LIBS/*" kafka.Kafka "$CONF" \
        </dev/null >"$LOG" 2>&1 9>&- &
    local i
    for i in $(seq 50); do
        pid="$(running_pid)" && break
        sleep 0.1
    done
    [[ -n "${pid:-}" ]] || { show_log_tail 40; die "the JVM did not start"; }
    wait_ready "$pid" || exit 1
    say "ready (pid $pid) on $HOST:$PORT after $((SECONDS - t0)) s"
}

cmd_stop() {
    local wipe=0
    case "${1:-}" in
        --wipe) wipe=1 ;;
        "") ;;
        *) usage ;;
    esac
    take_lock
    local pid
    if pid="$(running_pid)"; then
        say "stopping pid $pid"
        stop_broker "$pid"
    else
        rm -f "$PIDFILE"
        say "not running"
    fi
    if ((wipe)); then
        say "wiping $DATA"
        rm -rf "$DATA" "$CLUSTER_ID_FILE"
    fi
}

cmd_status() {
    local pid
    if pid="$(running_pid)"; then
        if metadata_ok; then
            echo "kafka: running (pid $pid) on $HOST:$PORT"
            return 0
        fi
        echo "kafka: process $pid is up but does not answer on $HOST:$PORT"
        return 1
    fi
    echo "kafka: not running"
    return 3
}

case "${1:-}" in
    start) cmd_start ;;
    stop) shift; cmd_stop "$@" ;;
    status) cmd_status ;;
    env) echo "FOOTFALL_KAFKA_BOOTSTRAP=$HOST:$PORT" ;;
    *) usage ;;
esac

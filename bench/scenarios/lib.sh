#!/usr/bin/env bash
# Shared by the scenarios: builds the release binaries, starts kafluss and the references on
# loopback ports chosen by the kernel, runs kafluss-bench against all of them in one invocation,
# and stops everything it started on exit. Everything it needs is in this repository or on PATH;
# paths are relative to the repository this file is in, wherever the scenario is started from.
#
# Results go to $RESULTS (default <target dir>/bench-results): <scenario>.txt (the report), .json
# (every figure), .svg (timeline), .cmd (the command), .fsync.txt (kafluss_fsync_seconds after the run), and <script>.kafluss.log (kafluss's log). kafluss's data goes to a fresh directory
# under $TMPDIR (default /tmp), removed when the scenario exits.
#
# Environment:
#   DURATION   seconds per endpoint per round (default 10)
#   ROUNDS     rounds, each running every endpoint (default 2)
#   PEERS      references to start (default "sink mock tansu kafka"); one that cannot be found is
#              left out with a message saying how to provide it
#   KAFKA_SH   the script that installs and runs Apache Kafka (default <repository>/tests/kafka/kafka.sh;
#              the `kafka` peer needs its jars: tests/kafka/kafka.sh setup, or ./test.sh --setup-only)
#   NO_BUILD=1 use the binaries as they are
#   CARGO_TARGET_DIR  where cargo builds (default <repository>/target); BENCH and KAFLUSS name
#              the binaries directly
#   PYTHON     a Python for the mock cluster and stock-client.sh (default <repository>/.venv/bin/python
#              when it exists, made by ./test.sh --setup-only, else python3); the mock cluster uses
#              the librdkafka of its confluent-kafka, or $LIBRDKAFKA, or the system's
#   TANSU      the tansu binary (default: tansu on PATH; cargo install tansu --features dynostore)
#   KAFLUSS_LOG  RUST_LOG of the kafluss under test (default warn)
#   KAFLUSS_DEFINE  space-separated key=value settings for the kafluss under test (-D each)
#   DISK_BYTES_PER_S, DISK_CHECK  see need_disk (binary-1k.sh)
#   SETTLE     before each measured run `settle` syncs, then waits at most this many seconds for
#              memory freed earlier (a previous run's data, the fsync probe's file) to be handed
#              back to the hypervisor (default 60; 0: neither the sync nor the wait)
set -euo pipefail

SCENARIOS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SCENARIOS/../.." && pwd)
source "$SCENARIOS/ready.sh"
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BENCH=${BENCH:-$TARGET/release/kafluss-bench}
KAFLUSS=${KAFLUSS:-$TARGET/release/kafluss}
RESULTS=${RESULTS:-$TARGET/bench-results}
if [[ -z ${PYTHON:-} ]]; then
    if [[ -x $ROOT/.venv/bin/python ]]; then
        PYTHON=$ROOT/.venv/bin/python
    else
        PYTHON=python3
    fi
fi
TANSU=${TANSU:-$(command -v tansu || true)}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-2}
PEERS=${PEERS:-sink mock tansu kafka}
KAFKA_SH=${KAFKA_SH:-$ROOT/tests/kafka/kafka.sh}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kafluss-bench.XXXXXX")
STARTED_PIDS=()
mkdir -p "$RESULTS"

cleanup() {
    local pid
    # Kafka runs detached from this shell: its own script stops it (bounded, SIGKILL after 30 s).
    if [[ -n ${KAFKA_DIR:-} ]]; then
        "$KAFKA_SH" stop "$KAFKA_DIR" || true
    fi
    for pid in "${STARTED_PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${STARTED_PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    # kafluss's own log (stall reports, storage errors) next to the results, to line up with
    # the slow requests the reports list.
    if [[ -f $WORK/kafluss.log ]]; then
        cp "$WORK/kafluss.log" "$RESULTS/$(basename "$0" .sh).kafluss.log" || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

log() { echo "== $*" >&2; }

build() {
    if [[ ${NO_BUILD:-0} != 1 ]]; then
        (cd "$ROOT" && cargo build --release -p kafluss-bench -p kafluss-broker)
    fi
}

# start_kafluss [-D key=value]...: sets KAFLUSS_PID, KAFLUSS_KAFKA, KAFLUSS_FLUSS.
start_kafluss() {
    local out=$WORK/kafluss.log line define defines=()
    for define in ${KAFLUSS_DEFINE:-}; do
        defines+=(-D "$define")
    done
    RUST_LOG=${KAFLUSS_LOG:-warn} "$KAFLUSS" serve \
        -D bind.listeners=FLUSS://127.0.0.1:0,KAFKA://127.0.0.1:0 \
        -D "data.dir=$WORK/kafluss-data" "${defines[@]}" "$@" >"$out" 2>&1 &
    KAFLUSS_PID=$!
    STARTED_PIDS+=("$KAFLUSS_PID")
    line=$(wait_for_line "$out" 'kafluss ready:' 60)
    kafluss_addresses "$line"
    log "kafluss pid $KAFLUSS_PID kafka $KAFLUSS_KAFKA fluss $KAFLUSS_FLUSS"
}

kafluss_sql() {
    "$KAFLUSS" sql --server "$KAFLUSS_FLUSS" -e "$1"
}

# kafluss_rows TABLE: rows stored in db.table, read back through the scan.
kafluss_rows() {
    "$KAFLUSS" scan "$1" --server "$KAFLUSS_FLUSS" --format jsonl | wc -l
}

# start_sink PARTITIONS: sets SINK_PID, SINK_ADDR.
start_sink() {
    local out=$WORK/sink.log line
    "$BENCH" sink --listen 127.0.0.1:0 --partitions "$1" >"$out" 2>&1 &
    SINK_PID=$!
    STARTED_PIDS+=("$SINK_PID")
    line=$(wait_for_line "$out" 'listening on' 10)
    SINK_ADDR=${line##* }
    log "null sink pid $SINK_PID at $SINK_ADDR"
}

# start_mock: librdkafka's mock cluster (one broker, in a Python process, bench/scenarios/
# mock_cluster.py); sets MOCK_PID, MOCK_ADDR, or leaves it out when no librdkafka loads.
start_mock() {
    local out=$WORK/mock.log line
    if ! command -v "$PYTHON" >/dev/null; then
        log "no Python at '$PYTHON' (set PYTHON, or run ./test.sh --setup-only for .venv): librdkafka mock cluster left out"
        return 0
    fi
    "$PYTHON" "$SCENARIOS/mock_cluster.py" --seconds 7200 >"$out" 2>&1 &
    MOCK_PID=$!
    STARTED_PIDS+=("$MOCK_PID")
    if ! line=$(wait_for_line "$out" '^BOOTSTRAP ' 30); then
        log "librdkafka mock cluster did not start (its log is above): left out"
        kill "$MOCK_PID" 2>/dev/null || true
        unset MOCK_PID
        return 0
    fi
    MOCK_ADDR=$(awk '{print $2}' <<<"$line")
    log "librdkafka mock cluster pid $MOCK_PID at $MOCK_ADDR ($(awk '{print $4}' <<<"$line"))"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_tansu: tansu with in-memory storage, when built; sets TANSU_PID, TANSU_ADDR.
start_tansu() {
    if [[ -z $TANSU || ! -x $TANSU ]]; then
        log "tansu not found (${TANSU:-not on PATH}): install it with 'cargo install tansu --features dynostore', or set TANSU=/path/to/tansu; left out"
        return 0
    fi
    local port out=$WORK/tansu.log i
    port=$(free_port)
    "$TANSU" broker --listener-url "tcp://127.0.0.1:$port" --advertised-listener-url "tcp://127.0.0.1:$port" \
        --storage-engine memory://tansu/ >"$out" 2>&1 &
    TANSU_PID=$!
    STARTED_PIDS+=("$TANSU_PID")
    for ((i = 0; i < 300; i++)); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            TANSU_ADDR=127.0.0.1:$port
            log "tansu pid $TANSU_PID at $TANSU_ADDR"
            return 0
        fi
        sleep 0.1
    done
    echo "tansu did not listen on $port within 30s:" >&2
    tail -20 "$out" >&2
    return 1
}

# tansu_topic NAME PARTITIONS: creates the topic on tansu (it does not create on Metadata).
tansu_topic() {
    if [[ -n ${TANSU_ADDR:-} ]]; then
        "$TANSU" topic create "$1" --partitions "$2" --broker "tcp://$TANSU_ADDR" >>"$WORK/tansu.log" 2>&1 ||
            log "tansu topic create $1 failed (see its log)"
    fi
}

# start_kafka: Apache Kafka 4.4 (single node, KRaft, tests/kafka/kafka.sh) with its data in $WORK;
# sets KAFKA_PID, KAFKA_ADDR, or leaves it out when its jars are not installed.
start_kafka() {
    local line
    if ! line=$("$KAFKA_SH" start "$WORK/kafka"); then
        log "Apache Kafka did not start (install it with '$KAFKA_SH setup' or ./test.sh --setup-only): left out"
        return 0
    fi
    KAFKA_DIR=$WORK/kafka
    KAFKA_ADDR=$(sed -E 's/.*bootstrap=([^ ]+).*/\1/' <<<"$line")
    KAFKA_PID=$(sed -E 's/.*pid=([0-9]+).*/\1/' <<<"$line")
    log "apache kafka pid $KAFKA_PID at $KAFKA_ADDR"
}

# kafka_topic NAME PARTITIONS: creates the topic on Kafka (auto-creation is off there).
kafka_topic() {
    if [[ -n ${KAFKA_ADDR:-} ]]; then
        "$KAFKA_SH" topic "$KAFKA_ADDR" "$1" "$2" >>"$WORK/kafka-topics.log" 2>&1 ||
            log "kafka topic create $1 failed (see $WORK/kafka-topics.log)"
    fi
}

# start_peers PARTITIONS TOPIC: the references named in $PEERS.
start_peers() {
    local partitions=$1 topic=$2 peer
    for peer in $PEERS; do
        case $peer in
            sink) start_sink "$partitions" ;;
            mock) start_mock ;;
            tansu) start_tansu && tansu_topic "$topic" "$partitions" ;;
            kafka) start_kafka && kafka_topic "$topic" "$partitions" ;;
            *) echo "unknown peer $peer" >&2; return 1 ;;
        esac
    done
}

# vs_args: the --vs options for every reference started.
vs_args() {
    VS_ARGS=()
    if [[ -n ${SINK_ADDR:-} ]]; then
        VS_ARGS+=(--vs "$SINK_ADDR" --vs-name sink --vs-server-pid "$SINK_PID")
    fi
    if [[ -n ${MOCK_ADDR:-} ]]; then
        VS_ARGS+=(--vs "$MOCK_ADDR" --vs-name rdkafka-mock --vs-server-pid "$MOCK_PID")
    fi
    if [[ -n ${TANSU_ADDR:-} ]]; then
        VS_ARGS+=(--vs "$TANSU_ADDR" --vs-name tansu --vs-server-pid "$TANSU_PID")
    fi
    if [[ -n ${KAFKA_ADDR:-} ]]; then
        VS_ARGS+=(--vs "$KAFKA_ADDR" --vs-name kafka --vs-server-pid "$KAFKA_PID")
    fi
}

# need_disk BYTES_PER_SECOND: stops the scenario, before anything is measured, when the file
# system of $WORK cannot hold what the endpoints that write to disk (kafluss, and Apache Kafka
# when it runs) may write: BYTES_PER_SECOND each, for DURATION seconds in each of ROUNDS rounds.
# DISK_BYTES_PER_S overrides the scenario's figure; DISK_CHECK=0 skips the check.
need_disk() {
    local rate=${DISK_BYTES_PER_S:-$1} writers=1 need avail
    [[ ${DISK_CHECK:-1} == 0 ]] && return 0
    [[ -n ${KAFKA_ADDR:-} ]] && writers=2
    need=$((rate * DURATION * ROUNDS * writers))
    avail=$(df --output=avail -B1 "$WORK" | tail -1)
    if ((avail < need)); then
        echo "$(basename "$0"): $WORK has $((avail >> 20)) MiB free; $writers endpoint(s) writing" \
            "up to $((rate >> 20)) MiB/s for $DURATION s x $ROUNDS rounds may need $((need >> 20)) MiB." \
            "Lower DURATION or ROUNDS, leave kafka out of PEERS, point TMPDIR at a larger disk," \
            "or set DISK_BYTES_PER_S (DISK_CHECK=0 skips this check)" >&2
        exit 1
    fi
    log "disk: $((avail >> 20)) MiB free in $WORK, up to $((need >> 20)) MiB may be written"
}

# settle: before a measured run, writes every dirty page to disk (`sync`: what an earlier run
# or a reference left in the page cache is not written back by the kernel during this one), then
# waits until the kernel has handed the memory freed by earlier steps back to the hypervisor
# (free page reporting), at most $SETTLE seconds: until its reported_kib counter grew by under
# 64 MiB in 5 s. In a guest that reports free pages, a run started right after a large file was
# deleted (the fsync probe's 1.5 GB, a previous invocation's segments) has bursts of 30-60 ms
# requests every 2 s for the whole run (docs/benchmarks.md, "Freed memory and the runs after it").
# The wait is skipped where the kernel has no such counter; SETTLE=0 skips both steps.
settle() {
    local counter=/sys/module/page_reporting/parameters/reported_kib limit=${SETTLE:-60} waited=0 before after
    ((limit > 0)) || return 0
    local dirty_kib started=$SECONDS
    dirty_kib=$(awk '/^Dirty:/ {print $2}' /proc/meminfo)
    sync
    log "settle: sync wrote back ${dirty_kib:-?} KiB of dirty pages in $((SECONDS - started)) s"
    [[ -r $counter ]] || return 0
    before=$(<"$counter")
    while ((waited < limit)); do
        sleep 5
        waited=$((waited + 5))
        after=$(<"$counter")
        if ((after - before < 65536)); then
            ((waited == 5)) || log "settled: freed memory handed back after ${waited}s"
            return 0
        fi
        before=$after
    done
    log "freed memory still being handed back after ${limit}s (SETTLE); measuring anyway"
}

# compare NAME ARGS...: kafluss first, every reference after it, alternating, in one invocation.
compare() {
    local name=$1
    shift
    vs_args
    local command=("$BENCH" produce --bootstrap "$KAFLUSS_KAFKA" --name kafluss --server-pid "$KAFLUSS_PID"
        "${VS_ARGS[@]}" --rounds "$ROUNDS" "$@"
        --json-out "$RESULTS/$name.json" --plot "$RESULTS/$name.svg")
    printf '%q ' "${command[@]}" >"$RESULTS/$name.cmd"
    echo >>"$RESULTS/$name.cmd"
    settle
    log "$name: ${command[*]}"
    "${command[@]}" | tee "$RESULTS/$name.txt"
    # The broker's own fsync durations (group commit, write-behind, rolls, close) over the run.
    curl -sf "http://$KAFLUSS_FLUSS/metrics" | grep '^kafluss_fsync_seconds' >"$RESULTS/$name.fsync.txt" ||
        log "could not read kafluss_fsync_seconds from http://$KAFLUSS_FLUSS/metrics"
}

# json_field FILE EXPR: a value from a result file (EXPR is Python on `d`).
json_field() {
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"
}

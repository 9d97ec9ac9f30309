#!/usr/bin/env bash
# Apache Kafka from Maven Central (tests/kafka/pom.xml: the broker kafka_2.13 and kafka-tools),
# for the bench's `kafka` peer (bench/scenarios/lib.sh) and the tests (tests/src/kafka.rs). The
# only place that installs, starts, stops and drives a real Kafka broker.
#
#   kafka.sh setup                 copy the runtime jars into tests/kafka/target/lib (Maven offline
#                                  first, then from Maven Central); nothing is done when they are
#                                  there and pom.xml has not changed since
#   kafka.sh check                 exits 0 when installed, else 1 saying what is missing
#   kafka.sh start DIR             a single-node KRaft broker (broker and controller in one JVM) on
#                                  free loopback ports, data and log in DIR (absent, empty, or a
#                                  previous broker's DIR, which is emptied),
#                                  started in the background; waits until it says it started (at
#                                  most KAFKA_START_TIMEOUT seconds, default 120), then prints
#                                  `kafka ready: bootstrap=127.0.0.1:PORT pid=PID` and exits
#   kafka.sh stop DIR              SIGTERM to the broker started in DIR, SIGKILL after 30 s
#   kafka.sh topic BOOTSTRAP NAME PARTITIONS
#                                  creates a topic (kafka-topics), replication factor 1
#   kafka.sh run CLASS ARGS...     runs any class of Kafka's classpath in the foreground, e.g.
#                                  org.apache.kafka.tools.ProducerPerformance (kafka-producer-perf-test)
#
# Java: $KAFKA_JAVA, else $KAFLUSS_JAVA, else java on PATH (Kafka 4.4 runs on Java 17).
# KAFKA_HEAP (default 1G) is the broker's -Xmx and -Xms.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LIB=$HERE/target/lib
STAMP=$HERE/target/.kafluss-inputs
JAVA=${KAFKA_JAVA:-${KAFLUSS_JAVA:-java}}
START_TIMEOUT=${KAFKA_START_TIMEOUT:-120}
STOP_TIMEOUT=30

die() { echo "kafka.sh: $*" >&2; exit 1; }

installed() {
    [[ -f $LIB/kafka_2.13-4.4.0.jar && "$(cat "$STAMP" 2>/dev/null)" == "$(sha256sum <"$HERE/pom.xml")" ]]
}

setup() {
    if installed; then
        echo "apache kafka: already installed in $LIB"
        return
    fi
    command -v mvn >/dev/null || die "no mvn on PATH (Debian: apt-get install maven)"
    rm -rf "$LIB" "$STAMP"
    local goal=(dependency:copy-dependencies -DoutputDirectory="$LIB" -DincludeScope=runtime)
    (cd "$HERE" && { mvn -q -B -o "${goal[@]}" >/dev/null 2>&1 || mvn -q -B "${goal[@]}"; }) ||
        die "mvn dependency:copy-dependencies failed in $HERE"
    sha256sum <"$HERE/pom.xml" >"$STAMP"
    echo "apache kafka: installed in $LIB ($(find "$LIB" -name '*.jar' | wc -l) jars)"
}

need_installed() {
    installed || die "Apache Kafka is not installed: run $HERE/kafka.sh setup (./test.sh --setup-only does)"
}

java_run() {
    need_installed
    "$JAVA" -cp "$LIB/*" -Dorg.slf4j.simpleLogger.defaultLogLevel=warn "$@"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
    local dir=$1 port controller cluster pid i
    need_installed
    # A previous broker's directory is emptied; anything else that is not empty is refused.
    if [[ -d $dir && -n "$(ls -A "$dir")" && ! -f $dir/server.properties ]]; then
        die "$dir is not empty and not a broker directory of this script: refusing to empty it"
    fi
    rm -rf "$dir"
    mkdir -p "$dir/data"
    dir=$(cd "$dir" && pwd)
    port=$(free_port)
    controller=$(free_port)
    while [[ $controller == "$port" ]]; do controller=$(free_port); done
    cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
controller.quorum.bootstrap.servers=127.0.0.1:$controller
log.dirs=$dir/data
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
    # A cluster id is 16 random bytes in URL-safe base64 without padding (Kafka's Uuid). Like
    # Kafka's Uuid.randomUuid(), draw again while it starts with '-': the storage tool would read
    # "-t -abc..." as an option and refuse to format (1 run in 64 failed so).
    cluster=-
    for ((i = 0; i < 100; i++)); do
        cluster=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
        [[ $cluster != -* ]] && break
    done
    [[ $cluster != -* ]] || die "could not draw a cluster id that does not start with '-'"
    java_run kafka.tools.StorageTool format --standalone -t "$cluster" -c "$dir/server.properties" \
        >"$dir/format.log" 2>&1 || { cat "$dir/format.log" >&2; die "formatting $dir failed"; }
    # Detached from the caller's terminal; the caller stops it with `kafka.sh stop DIR`.
    "$JAVA" -Xmx"${KAFKA_HEAP:-1G}" -Xms"${KAFKA_HEAP:-1G}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
        -Djava.awt.headless=true -cp "$LIB/*" \
        -Dorg.slf4j.simpleLogger.defaultLogLevel=info -Dorg.slf4j.simpleLogger.logFile="$dir/server.log" \
        -Dorg.slf4j.simpleLogger.showDateTime=true \
        kafka.Kafka "$dir/server.properties" </dev/null >"$dir/stdout.log" 2>&1 &
    pid=$!
    echo "$pid" >"$dir/kafka.pid"
    for ((i = 0; i < START_TIMEOUT * 10; i++)); do
        if grep -q 'Kafka Server started' "$dir/server.log" 2>/dev/null; then
            echo "kafka ready: bootstrap=127.0.0.1:$port pid=$pid"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -30 "$dir/server.log" "$dir/stdout.log" >&2 2>/dev/null || true
            die "the broker exited before it started (log above, in $dir)"
        fi
        sleep 0.1
    done
    tail -30 "$dir/server.log" >&2 2>/dev/null || true
    stop "$dir"
    die "the broker did not start within ${START_TIMEOUT}s (log above, in $dir)"
}

stop() {
    local dir=$1 pid i
    pid=$(cat "$dir/kafka.pid" 2>/dev/null) || return 0
    kill "$pid" 2>/dev/null || { rm -f "$dir/kafka.pid"; return 0; }
    for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$dir/kafka.pid"
}

topic() {
    java_run org.apache.kafka.tools.TopicCommand --bootstrap-server "$1" --create --topic "$2" \
        --partitions "$3" --replication-factor 1
}

case ${1:-} in
    setup) setup ;;
    check) need_installed ;;
    start) [[ $# -eq 2 ]] || die "usage: kafka.sh start DIR"; start "$2" ;;
    stop) [[ $# -eq 2 ]] || die "usage: kafka.sh stop DIR"; stop "$2" ;;
    topic) [[ $# -eq 4 ]] || die "usage: kafka.sh topic BOOTSTRAP NAME PARTITIONS"; topic "$2" "$3" "$4" ;;
    run) [[ $# -ge 2 ]] || die "usage: kafka.sh run CLASS ARGS..."; shift; java_run "$@" ;;
    *) die "usage: kafka.sh setup | check | start DIR | stop DIR | topic BOOTSTRAP NAME PARTITIONS | run CLASS ARGS..." ;;
esac

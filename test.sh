#!/usr/bin/env bash
# The one test command (README): installs what the tests need, idempotently, then runs them all.
#
#   ./test.sh              set up, then fmt, build, clippy, rustdoc, cargo test, the real-client suite
#   ./test.sh --setup-only set up only (cc and make, kcat, .venv with the Python clients, npm
#                          kafkajs, the Java producer built with Maven, the Go producer built
#                          with go, Apache Kafka's broker and tools from Maven Central)
#
# Set-up works on a fresh Debian machine as root (or with sudo) reaching only the package
# registries. Every step runs even when an earlier one failed (except what a failed build makes
# pointless); the last line counts the steps and the exit status is non-zero on any failure.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT" || exit 1

VENV="$ROOT/.venv"
CLIENTS_DIR="$ROOT/tests/clients"
REQUIREMENTS="$CLIENTS_DIR/requirements.txt"
JAVA_DIR="$CLIENTS_DIR/java"
GO_DIR="$CLIENTS_DIR/go"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
# The suite starts many servers, each with its own cores; two tests at a time suit a 2-core box.
SUITE_THREADS="${KAFLUSS_SUITE_THREADS:-2}"

log() { printf '\n==> %s\n' "$*"; }
die() { printf 'test.sh: %s\n' "$*" >&2; exit 1; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        die "need root (or sudo) to run: $*"
    fi
}

apt_updated=0
apt_install() {
    if [ "$apt_updated" -eq 0 ]; then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q || die "apt-get update failed"
        apt_updated=1
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" || die "apt-get install $* failed"
}

setup_build_tools() {
    # The build compiles C sources (zstd, lz4, jemalloc: jemalloc's needs make as well).
    if command -v cc >/dev/null && command -v make >/dev/null; then
        echo "build tools: cc and make (already installed)"
        return
    fi
    log "installing a C compiler and make (Debian)"
    apt_install gcc make libc6-dev
}

setup_kcat() {
    if command -v kcat >/dev/null; then
        echo "kcat: $(kcat -V 2>&1 | grep -o 'librdkafka [0-9.]*' | head -1) (already installed)"
        return
    fi
    log "installing kcat (Debian)"
    apt_install kcat
}

setup_venv() {
    if [ ! -x "$VENV/bin/python" ]; then
        log "creating $VENV"
        if ! python3 -m venv "$VENV" 2>/dev/null; then
            rm -rf "$VENV"
            apt_install python3-venv
            python3 -m venv "$VENV" || die "python3 -m venv failed"
        fi
    fi
    # Reinstall only when the pinned list changed since the last successful install.
    local stamp="$VENV/.kafluss-requirements"
    if ! cmp -s "$REQUIREMENTS" "$stamp"; then
        log "installing Python clients into $VENV"
        "$VENV/bin/pip" install --disable-pip-version-check -q -r "$REQUIREMENTS" \
            || die "pip install -r $REQUIREMENTS failed"
        cp "$REQUIREMENTS" "$stamp"
    else
        echo "python clients: already installed in $VENV"
    fi
    # The confluent-kafka wheel carries a newer librdkafka under a hashed file name; kcat loads it
    # as librdkafka.so.1 from this folder through LD_LIBRARY_PATH.
    local wheel_lib
    wheel_lib="$(find "$VENV"/lib/python3*/site-packages/confluent_kafka.libs -name 'librdkafka*.so*' 2>/dev/null | head -1)"
    [ -n "$wheel_lib" ] || die "no librdkafka inside the confluent-kafka wheel"
    mkdir -p "$VENV/librdkafka-wheel"
    ln -sf "$wheel_lib" "$VENV/librdkafka-wheel/librdkafka.so.1"
}

setup_node() {
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        log "installing Node.js and npm (Debian)"
        apt_install nodejs npm
    fi
    if [ ! -d "$CLIENTS_DIR/node_modules" ] || [ "$CLIENTS_DIR/package-lock.json" -nt "$CLIENTS_DIR/node_modules" ]; then
        log "installing kafkajs (npm ci)"
        (cd "$CLIENTS_DIR" && npm ci --no-audit --no-fund) || die "npm ci failed"
        touch "$CLIENTS_DIR/node_modules"
    else
        echo "kafkajs: already installed in $CLIENTS_DIR/node_modules"
    fi
}

# A fingerprint of a client's build inputs (in folder $1, the files `find $2...` prints): the client
# is rebuilt only when it differs from the last good build's.
inputs_digest() {
    (cd "$1" && find "${@:2}" -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -d' ' -f1
}

setup_java() {
    if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
        log "installing Java 17 and Maven (Debian)"
        apt_install openjdk-17-jdk-headless maven
    fi
    # One build per kafka-clients line (the pom's profiles), each into target/<profile>/.
    local stamp="$JAVA_DIR/target/.kafluss-inputs" digest
    digest="$(inputs_digest "$JAVA_DIR" pom.xml src -type f)"
    if [ "$(cat "$stamp" 2>/dev/null)" = "$digest" ] \
        && [ -f "$JAVA_DIR/target/kafka-3.9/kafluss-java-producer.jar" ] \
        && [ -f "$JAVA_DIR/target/kafka-4/kafluss-java-producer.jar" ]; then
        echo "java producer: already built in $JAVA_DIR/target"
        return
    fi
    log "building the Java producer (Maven, kafka-clients 3.9 and 4)"
    rm -f "$stamp"
    local profile
    for profile in kafka-3.9 kafka-4; do
        # Offline first (everything already in ~/.m2), else fetch from Maven Central.
        (cd "$JAVA_DIR" && { mvn -q -B -o package -P "$profile" >/dev/null 2>&1 || mvn -q -B package -P "$profile"; }) \
            || die "mvn package -P $profile failed in $JAVA_DIR"
    done
    echo "$digest" > "$stamp"
}

setup_go() {
    # go.mod asks for Go 1.26, newer than Debian's golang-go (1.19): use the machine's toolchain.
    if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
        PATH="/usr/local/go/bin:$PATH"
    fi
    command -v go >/dev/null || die "no go on PATH or in /usr/local/go/bin (the Go producer needs Go 1.26)"
    local stamp="$GO_DIR/bin/.kafluss-inputs" digest
    digest="$(inputs_digest "$GO_DIR" . -path ./bin -prune -o -type f \( -name '*.go' -o -name go.mod -o -name go.sum \))"
    if [ "$(cat "$stamp" 2>/dev/null)" = "$digest" ] && [ -x "$GO_DIR/bin/kafluss-go-producer" ]; then
        echo "go producer: already built in $GO_DIR/bin"
        return
    fi
    log "building the Go producer (franz-go and sarama)"
    rm -f "$stamp"
    (cd "$GO_DIR" && go build -mod=readonly -o bin/kafluss-go-producer .) || die "go build failed in $GO_DIR"
    echo "$digest" > "$stamp"
}

setup_kafka() {
    # The broker and tools (kafka-producer-perf-test) of Apache Kafka, jars from Maven Central:
    # tests/kafka/kafka.sh installs them only when its pom changed.
    "$ROOT/tests/kafka/kafka.sh" setup || die "installing Apache Kafka (tests/kafka) failed"
}

setup() {
    log "set-up"
    setup_build_tools
    setup_kcat
    setup_venv
    setup_node
    setup_java
    setup_go
    setup_kafka
}

setup
if [ "${1:-}" = "--setup-only" ]; then
    echo "set-up done"
    exit 0
fi

# What the client suite needs; KAFLUSS_REQUIRE_CLIENTS makes a missing client a failure.
export KAFLUSS_BIN="$TARGET_DIR/debug/kafluss"
export KAFLUSS_PYTHON="$VENV/bin/python"
KAFLUSS_NODE="$(command -v node)"
export KAFLUSS_NODE
export KAFLUSS_NODE_MODULES="$CLIENTS_DIR/node_modules"
KAFLUSS_KCAT="$(command -v kcat)"
export KAFLUSS_KCAT
export KAFLUSS_WHEEL_LIBRDKAFKA_DIR="$VENV/librdkafka-wheel"
KAFLUSS_JAVA="$(command -v java)"
export KAFLUSS_JAVA
export KAFLUSS_JAVA_PRODUCERS="$JAVA_DIR/target"
export KAFLUSS_GO_PRODUCER="$GO_DIR/bin/kafluss-go-producer"
export KAFLUSS_RESULTS_DIR="$TARGET_DIR/kafluss-suite"
export KAFLUSS_REQUIRE_CLIENTS=1

passed=()
failed=()
step() {
    local name="$1"
    shift
    log "$name: $*"
    local started=$SECONDS
    if "$@"; then
        passed+=("$name")
        echo "--> $name passed ($((SECONDS - started)) s)"
    else
        failed+=("$name")
        echo "--> $name FAILED ($((SECONDS - started)) s)"
    fi
}

step fmt cargo fmt --all -- --check
step build cargo build --workspace --all-targets
if [[ " ${failed[*]} " == *" build "* ]]; then
    echo "test.sh: the build failed; nothing to test"
    echo "test.sh: ${#passed[@]} passed, ${#failed[@]} failed"
    exit 1
fi
step clippy cargo clippy --workspace --all-targets -- -D warnings
# The API docs build without a warning: no broken or private intra-doc link.
step rustdoc env RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
step unit-tests cargo test --workspace --exclude kafluss-tests --no-fail-fast
rm -rf "$KAFLUSS_RESULTS_DIR"
step client-suite cargo test -p kafluss-tests --no-fail-fast -- --test-threads="$SUITE_THREADS"
step suite-report cargo run -q -p kafluss-tests --bin kafluss-suite-report

echo
if [ "${#failed[@]}" -gt 0 ]; then echo "failed steps: ${failed[*]}"; fi
echo "test.sh: ${#passed[@]} passed, ${#failed[@]} failed"
[ "${#failed[@]}" -eq 0 ]

#!/usr/bin/env bash
# The one test command (README): installs what the tests need, idempotently, then runs them all.
#
#   ./test.sh              set up, then fmt, build, clippy, cargo test, the real-client suite
#   ./test.sh --setup-only set up only (kcat, .venv with the Python clients, npm kafkajs)
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

setup() {
    log "set-up"
    setup_kcat
    setup_venv
    setup_node
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
step unit-tests cargo test --workspace --exclude kafluss-tests --no-fail-fast
rm -rf "$KAFLUSS_RESULTS_DIR"
step client-suite cargo test -p kafluss-tests --no-fail-fast -- --test-threads="$SUITE_THREADS"
step suite-report cargo run -q -p kafluss-tests --bin kafluss-suite-report

echo
if [ "${#failed[@]}" -gt 0 ]; then echo "failed steps: ${failed[*]}"; fi
echo "test.sh: ${#passed[@]} passed, ${#failed[@]} failed"
[ "${#failed[@]}" -eq 0 ]

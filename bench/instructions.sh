#!/usr/bin/env bash
# Instructions per row, counted by callgrind: deterministic, so the same build gives the same
# figure at any machine load (docs/benchmarks.md, "The row path counted" and "Conversion
# instruction counts"). Each workload runs twice under `valgrind --tool=callgrind`, with 1 and
# with ROUNDS + 1 measured rounds (after the bench's own warm-up), and the difference is divided
# by the rows of ROUNDS rounds: set-up and warm-up cancel out.
#
#   bench/instructions.sh [workload...]          broker/benches/row_path.rs: decode, convert and
#                                                encode (ZSTD 3) of a bucket's rows, per stage
#   BENCH=convert bench/instructions.sh [...]    convert/benches/rows_per_cpu_second.rs:
#                                                conversion alone
#   BENCH=server bench/instructions.sh           the release server itself (every thread),
#                                                per Produce request of one flat JSON record
#                                                at RATE requests a second: REQUESTS and
#                                                3 x REQUESTS requests, the difference divided
#                                                by 2 x REQUESTS; also the stored messages of
#                                                each run, and exit 1 when the runs' difference
#                                                is more than 5 % off one message per request
#
# A workload argument picks the bench's workloads whose name contains it (default: all).
#   ROWS      rows per round of row_path, so per stored message (default 1000); the convert
#             bench's rounds are batches of 1,000 rows
#   ROUNDS    measured rounds (default 10)
#   BIN       the bench binary to run (default: built with `cargo bench --no-run`)
#   OUT       where the callgrind files are kept (default: a temporary directory, removed)
#   REQUESTS  BENCH=server: the smaller run's requests (default 600)
#   RATE      BENCH=server: requests a second (default 200: slow enough for the server under
#             callgrind to answer each request before the next arrives, so every request
#             after the first few dozen is its own stored message and its own wake-up, and the
#             count repeats within ~2 %)
#   KAFLUSS, KAFLUSS_BENCH  BENCH=server: the release binaries (default: built)
# Needs valgrind (with callgrind_annotate): apt-get install valgrind. BENCH=server needs
# valgrind 3.22 or later, which lets other threads run while one waits in io_uring_enter
# (3.19, Debian 12's, holds its lock there and the server's cores never finish starting).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/bench/scenarios/ready.sh"
BENCH=${BENCH:-row_path}
ROUNDS=${ROUNDS:-10}
case $BENCH in
    row_path)
        package=kafluss-broker rows=${ROWS:-1000}
        workloads=(flat_json nested binary_1kib text_100b load_json_flat)
        ;;
    convert)
        package=kafluss-convert BENCH=rows_per_cpu_second rows=1000
        workloads=(flat nested binary)
        ;;
    server) ;;
    *)
        echo "instructions.sh: BENCH is row_path, convert or server, not $BENCH" >&2
        exit 2
        ;;
esac
for tool in valgrind callgrind_annotate; do
    if ! command -v "$tool" >/dev/null; then
        echo "instructions.sh needs $tool (Debian/Ubuntu: apt-get install valgrind)" >&2
        exit 2
    fi
done
if [[ $# -gt 0 && $BENCH != server ]]; then
    workloads=("$@")
fi
if [[ $BENCH == server ]]; then
    version=$(valgrind --version | sed -n 's/^valgrind-\([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
    read -r major minor <<<"${version:-0 0}"
    if ((major < 3 || (major == 3 && minor < 22))); then
        echo "instructions.sh: BENCH=server needs valgrind 3.22 or later ($(valgrind --version) holds its lock in io_uring_enter, so the server never starts)" >&2
        exit 2
    fi
    if [[ -z ${KAFLUSS:-} || -z ${KAFLUSS_BENCH:-} ]]; then
        built=$(cd "$ROOT" && cargo build --release -p kafluss-broker -p kafluss-bench 2>&1) || {
            echo "$built" >&2
            echo "instructions.sh: building the release binaries failed" >&2
            exit 1
        }
        target=$(cd "$ROOT" && cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
        KAFLUSS=${KAFLUSS:-$target/release/kafluss} KAFLUSS_BENCH=${KAFLUSS_BENCH:-$target/release/kafluss-bench}
    fi
elif [[ -z ${BIN:-} ]]; then
    built=$(cd "$ROOT" && cargo bench -p "$package" --bench "$BENCH" --no-run 2>&1) || {
        echo "$built" >&2
        echo "instructions.sh: building the $BENCH bench failed" >&2
        exit 1
    }
    BIN=$(sed -n 's/.*Executable .*(\(.*\))$/\1/p' <<<"$built" | tail -1)
    [[ -n $BIN ]] || {
        echo "instructions.sh: cargo bench --no-run printed no executable for $BENCH" >&2
        exit 1
    }
    [[ $BIN == /* ]] || BIN=$ROOT/$BIN
fi
if [[ -n ${OUT:-} ]]; then
    mkdir -p "$OUT"
else
    OUT=$(mktemp -d)
    trap 'rm -rf "$OUT"' EXIT
fi

# The instructions callgrind counted in its output file $1.
total() {
    sed -n 's/^summary: *\([0-9]*\).*/\1/p; s/^totals: *\([0-9]*\).*/\1/p' "$1" | head -1
}

# The instructions of function $2 and what it calls, in callgrind output file $1 (0 if absent).
# Run from $OUT: from a directory where the sources' relative paths resolve, callgrind_annotate
# lists a function once per path spelling, each with part of its count.
inclusive() {
    (cd "$OUT" && callgrind_annotate --inclusive=yes --threshold=100 --auto=no "$1" 2>/dev/null) |
        awk -v fn=":$2 [" '!found && index($0, fn) { gsub(",", "", $1); count = $1; found = 1 }
            END { print found ? count : 0 }'
}

# The calls of function $2 in callgrind output file $1 (0 if absent): in the caller tree, the
# sum of the "(Nx)" of the caller lines ("<") just above the function's own line ("*").
calls() {
    (cd "$OUT" && callgrind_annotate --tree=caller --threshold=100 --auto=no "$1" 2>/dev/null) |
        awk -v fn=":$2 [" '
            / < / && match($0, /\([0-9,]+x\)/) {
                c = substr($0, RSTART + 1, RLENGTH - 3); gsub(",", "", c); sum += c; next
            }
            / \* / && index($0, fn) { total += sum }
            { sum = 0 }
            END { print total + 0 }'
}

per_row() {
    echo $((($2 - $1) / (ROUNDS * rows)))
}

# One run of the server under callgrind, into $OUT/server.$1: $1 Produce requests of one record
# each at RATE a second on 4 connections, then SIGTERM (callgrind writes its file at exit).
server_run() {
    local n=$1 dir=$OUT/server.$1.d log pid line
    mkdir -p "$dir"
    log=$dir/kafluss.log
    valgrind --tool=callgrind --callgrind-out-file="$OUT/server.$n" "$KAFLUSS" serve \
        -D bind.listeners=FLUSS://127.0.0.1:0,KAFKA://127.0.0.1:0 -D "data.dir=$dir/data" \
        -D server.stall-threshold=0 >"$log" 2>&1 &
    pid=$!
    line=$(wait_for_line "$log" '^kafluss ready:' 120) || {
        kill "$pid" 2>/dev/null
        echo "instructions.sh: kafluss under callgrind did not start (see $log)" >&2
        return 1
    }
    kafluss_addresses "$line"
    "$KAFLUSS" sql --server "$KAFLUSS_FLUSS" \
        -e "$("$KAFLUSS_BENCH" table-sql --table fluss.t --value json-flat --partitions 2)" >"$dir/sql.out" 2>&1 &&
        "$KAFLUSS_BENCH" produce --bootstrap "$KAFLUSS_KAFKA" --topic t --value json-flat --message-size 100 \
            --acks 1 --connections 4 --inflight 64 --batch-records 1 --rate "${RATE:-200}" \
            --records "$n" --timeout-ms 120000 >"$dir/produce.out" 2>&1 || {
        kill "$pid" 2>/dev/null
        echo "instructions.sh: the load against kafluss under callgrind failed (see $dir)" >&2
        return 1
    }
    # Callgrind writes its file as the server exits: up to 2 minutes for a graceful stop.
    kill -TERM "$pid"
    for _ in $(seq 1200); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid"
        wait "$pid" || true
        echo "instructions.sh: kafluss under callgrind did not stop within 2 minutes of SIGTERM (see $log)" >&2
        return 1
    fi
    wait "$pid" || true
}

if [[ $BENCH == server ]]; then
    REQUESTS=${REQUESTS:-600}
    server_run "$REQUESTS" && server_run $((3 * REQUESTS)) || {
        trap - EXIT
        exit 1
    }
    first=$OUT/server.$REQUESTS last=$OUT/server.$((3 * REQUESTS))
    per_request() {
        echo $((($2 - $1) / (2 * REQUESTS)))
    }
    # Stored messages written in each run: a request is its own message unless requests waited
    # (the server under callgrind fell behind the load) and shared one.
    encoder=kafluss_broker::log::encode::Encoder::encode_into
    messages_first=$(calls "$first" "$encoder") messages_last=$(calls "$last" "$encoder")
    printf '%-14s %8s %10s %10s %10s %10s %12s\n' workload requests instr/req serve appends park messages
    printf '%-14s %8s %10s' single_record "$REQUESTS" "$(per_request "$(total "$first")" "$(total "$last")")"
    for fn in "kafluss_broker::kafka::connection::serve::{{closure}}" \
        "kafluss_broker::append::bucket::Buckets<R>::actor::{{closure}}" glommio::parking::Parker::park; do
        printf ' %10s' "$(per_request "$(inclusive "$first" "$fn")" "$(inclusive "$last" "$fn")")"
    done
    printf ' %12s\n' "$messages_first/$messages_last"
    # The runs' difference is one message per request when as many requests shared messages in
    # both runs (84 and 82 of 600 and 1,800 in the runs of docs/benchmarks.md, "Stored messages
    # counted beside the server's instructions"); more than 5 % off means a run fell behind its
    # load for a while, and the difference is not 2 x REQUESTS requests' worth: exit 1 after
    # the figure.
    extra=$((messages_last - messages_first - 2 * REQUESTS))
    if ((20 * extra > 2 * REQUESTS || -20 * extra > 2 * REQUESTS)); then
        echo "instructions.sh: the runs stored $messages_first and $messages_last messages for" \
            "$REQUESTS and $((3 * REQUESTS)) requests, $((messages_last - messages_first)) apart for" \
            "$((2 * REQUESTS)) more requests: the server under callgrind fell behind its load and" \
            "requests shared messages, so the figure is not one request's; run again (with a lower" \
            "RATE if it repeats)" >&2
        exit 1
    fi
    exit 0
fi

printf '%-22s %6s %10s' workload rows instr/row
[[ $BENCH == row_path ]] && printf ' %8s %8s %8s %8s' decode convert encode zstd
printf '\n'
for workload in "${workloads[@]}"; do
    for n in 1 $((ROUNDS + 1)); do
        env KAFLUSS_BENCH_BATCHES=$n ${ROWS:+KAFLUSS_BENCH_ROWS=$ROWS} valgrind --tool=callgrind \
            --callgrind-out-file="$OUT/$workload.$n" "$BIN" "$workload" >"$OUT/$workload.$n.log" 2>&1 || {
            echo "instructions.sh: $BIN $workload under callgrind failed (see $OUT/$workload.$n.log)" >&2
            trap - EXIT
            exit 1
        }
    done
    first=$OUT/$workload.1 last=$OUT/$workload.$((ROUNDS + 1))
    printf '%-22s %6s %10s' "$workload" "$rows" "$(per_row "$(total "$first")" "$(total "$last")")"
    if [[ $BENCH == row_path ]]; then
        for fn in kafluss_broker::append::pipeline::decode_batches \
            "kafluss_convert::batch::BatchBuilder::push kafluss_convert::batch::BatchBuilder::finish" \
            kafluss_broker::log::encode::Encoder::encode_into ZSTD_compress2; do
            a=0 b=0
            for f in $fn; do
                a=$((a + $(inclusive "$first" "$f"))) b=$((b + $(inclusive "$last" "$f")))
            done
            printf ' %8s' "$(per_row "$a" "$b")"
        done
    fi
    printf '\n'
done

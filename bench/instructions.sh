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
#
# A workload argument picks the bench's workloads whose name contains it (default: all).
#   ROWS      rows per round of row_path, so per stored message (default 1000); the convert
#             bench's rounds are batches of 1,000 rows
#   ROUNDS    measured rounds (default 10)
#   BIN       the bench binary to run (default: built with `cargo bench --no-run`)
#   OUT       where the callgrind files are kept (default: a temporary directory, removed)
# Needs valgrind (with callgrind_annotate): apt-get install valgrind.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
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
    *)
        echo "instructions.sh: BENCH is row_path or convert, not $BENCH" >&2
        exit 2
        ;;
esac
for tool in valgrind callgrind_annotate; do
    if ! command -v "$tool" >/dev/null; then
        echo "instructions.sh needs $tool (Debian/Ubuntu: apt-get install valgrind)" >&2
        exit 2
    fi
done
if [[ $# -gt 0 ]]; then
    workloads=("$@")
fi
if [[ -z ${BIN:-} ]]; then
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

per_row() {
    echo $((($2 - $1) / (ROUNDS * rows)))
}

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

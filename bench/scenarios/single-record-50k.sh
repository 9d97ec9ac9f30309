#!/usr/bin/env bash
# One 100-byte flat JSON record per request at 50,000 requests/s (open loop, acks=1): broker CPU
# per request and p99 (targets in docs/benchmarks.md: <= 5 us broker CPU per request, p99 <= 1 ms),
# against the references at the same rate, in one invocation.
# shellcheck source-path=SCRIPTDIR disable=SC2119 # start_kafluss takes optional -D settings
source "$(dirname "$0")/lib.sh"
build
start_kafluss
kafluss_sql "$("$BENCH" table-sql --table fluss.single100 --value json-flat --partitions 2)"
start_peers 2 single100
compare single-record-50k --topic single100 --value json-flat --message-size 100 --acks 1 \
    --connections 4 --inflight 64 --batch-records 1 --rate "${RATE:-50000}" --duration "$DURATION"

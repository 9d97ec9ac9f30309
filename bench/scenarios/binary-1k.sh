#!/usr/bin/env bash
# Random 1 KiB binary values, acks=1, flat out: kafluss (binary conversion, 2 buckets) against
# the references, alternating, in one invocation.
# shellcheck source-path=SCRIPTDIR disable=SC2119 # start_kafluss takes optional -D settings
source "$(dirname "$0")/lib.sh"
build
start_kafluss
kafluss_sql "$("$BENCH" table-sql --table fluss.bin1k --value random --partitions 2)"
start_peers 2 bin1k
# kafluss stored 1.2 GB/s of incompressible values over 10 s runs on this project's machine, 1.7
# GB/s over 2 s (docs/benchmarks.md); 1.75 GiB/s per writer is the bound checked. With Apache
# Kafka writing its log to the same disk, the default 2 rounds of 10 s may write over 70 GB.
need_disk $((1792 << 20))
compare binary-1k --topic bin1k --value random --message-size 1024 --acks 1 \
    --connections 2 --inflight 4 --batch-records 100 --duration "$DURATION"

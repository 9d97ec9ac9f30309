#!/usr/bin/env bash
# Latency at half of kafluss's maximum: first a flat-out run of flat JSON 100 B (acks=1) finds
# the maximum, then the same records at half that rate (open loop, 5 ms linger, latency from each
# request's scheduled time) with acks=1 and with acks=-1 (fsync'd on kafluss), against the
# references at the same rate, in one invocation each. Before the acks=-1 run the harness measures
# the disk's own fsync latency on the file system of kafluss's data (kafluss-bench fsync-probe,
# 64 KiB appends each fdatasync'd, for DURATION seconds): the acks=-1 target is that p99 + 1 ms
# (fsync-probe.txt, fsync-probe.json).
# shellcheck source-path=SCRIPTDIR disable=SC2119 # start_kafluss takes optional -D settings
source "$(dirname "$0")/lib.sh"
build
start_kafluss
kafluss_sql "$("$BENCH" table-sql --table fluss.rate100 --value json-flat --partitions 2)"
start_peers 2 rate100
settle
common=(--topic rate100 --value json-flat --message-size 100 --connections 2 --batch-records 500)
"$BENCH" produce --bootstrap "$KAFLUSS_KAFKA" --name kafluss --server-pid "$KAFLUSS_PID" "${common[@]}" \
    --acks 1 --inflight 4 --duration "$DURATION" --quiet --json-out "$RESULTS/fixed-rate-max.json" |
    tee "$RESULTS/fixed-rate-max.txt"
max=$(json_field "$RESULTS/fixed-rate-max.json" 'd["runs"][0]["records_per_s"]')
half=$(python3 -c "print(int(float('$max') / 2))")
log "kafluss maximum $max records/s; fixed rate $half records/s"
for acks in 1 -1; do
    name=fixed-rate-acks$acks
    if [[ $acks == -1 ]]; then
        name=fixed-rate-acks-all
        "$BENCH" fsync-probe --dir "$WORK" --duration "$DURATION" --json-out "$RESULTS/fsync-probe.json" |
            tee "$RESULTS/fsync-probe.txt"
        log "acks=-1 target: p99 <= $(json_field "$RESULTS/fsync-probe.json" 'd["fdatasync"]["p99_us"] / 1000 + 1') ms (disk fsync p99 + 1 ms)"
    fi
    compare "$name" "${common[@]}" --acks "$acks" --inflight 64 --rate "$half" --linger-ms 5 \
        --duration "$DURATION"
done

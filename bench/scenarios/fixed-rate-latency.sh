#!/usr/bin/env bash
# Latency at half of kafluss's maximum: first a flat-out run of flat JSON 100 B (acks=1) finds
# the maximum, then the same records at half that rate (open loop, 5 ms linger, latency from each
# request's scheduled time) with acks=1 and with acks=-1 (fsync'd on kafluss), against the
# references at the same rate, in one invocation each.
# shellcheck source-path=SCRIPTDIR disable=SC2119 # start_kafluss takes optional -D settings
source "$(dirname "$0")/lib.sh"
build
start_kafluss
kafluss_sql "$("$BENCH" table-sql --table fluss.rate100 --value json-flat --partitions 2)"
start_peers 2 rate100
common=(--topic rate100 --value json-flat --message-size 100 --connections 2 --batch-records 500)
"$BENCH" produce --bootstrap "$KAFLUSS_KAFKA" --name kafluss --server-pid "$KAFLUSS_PID" "${common[@]}" \
    --acks 1 --inflight 4 --duration "$DURATION" --quiet --json-out "$RESULTS/fixed-rate-max.json" |
    tee "$RESULTS/fixed-rate-max.txt"
max=$(json_field "$RESULTS/fixed-rate-max.json" 'd["runs"][0]["records_per_s"]')
half=$(python3 -c "print(int(float('$max') / 2))")
log "kafluss maximum $max records/s; fixed rate $half records/s"
for acks in 1 -1; do
    name=fixed-rate-acks$acks
    [[ $acks == -1 ]] && name=fixed-rate-acks-all
    compare "$name" "${common[@]}" --acks "$acks" --inflight 64 --rate "$half" --linger-ms 5 \
        --duration "$DURATION"
done

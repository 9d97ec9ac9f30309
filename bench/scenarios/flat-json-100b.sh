#!/usr/bin/env bash
# Flat JSON records of 100 bytes, acks=1, flat out: kafluss (2 buckets) against the null sink,
# librdkafka's mock cluster and tansu (memory), alternating, in one invocation.
# shellcheck source-path=SCRIPTDIR disable=SC2119 # start_kafluss takes optional -D settings
source "$(dirname "$0")/lib.sh"
build
start_kafluss
kafluss_sql "$("$BENCH" table-sql --table fluss.flat100 --value json-flat --partitions 2)"
start_peers 2 flat100
compare flat-json-100b --topic flat100 --value json-flat --message-size 100 --acks 1 \
    --connections 2 --inflight 4 --batch-records 500 --duration "$DURATION"

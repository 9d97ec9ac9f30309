#!/usr/bin/env bash
# 10,000 idle connections (ApiVersions + Metadata each, then silence) held open while flat JSON
# 100 B load runs: the server's RSS at start, with the idle connections, after the load, and each
# second (timeline). kafluss's idle timeout and connection limit (10,000 by default) are raised so
# the idle connections and the load fit.
# shellcheck source-path=SCRIPTDIR disable=SC2119 # start_kafluss takes optional -D settings
source "$(dirname "$0")/lib.sh"
IDLE=${IDLE:-10000}
ulimit -n "$(ulimit -Hn)"
build
start_kafluss -D kafka.connection.max-idle-time=1h -D kafka.max-connections=20000
kafluss_sql "$("$BENCH" table-sql --table fluss.idle100 --value json-flat --partitions 2)"
PEERS=${PEERS_IDLE:-tansu} start_peers 2 idle100
compare idle-connections --topic idle100 --value json-flat --message-size 100 --acks 1 \
    --connections 2 --inflight 4 --batch-records 500 --idle-connections "$IDLE" --duration "$DURATION"

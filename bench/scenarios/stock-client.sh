#!/usr/bin/env bash
# Cross-check of the harness with stock clients: the same RECORDS flat JSON 100 B records
# (acks=1, 5 ms linger, batches of 500) sent by kcat, by confluent-kafka, by the Java client
# (kafka-clients 4, tests/clients/java) and by franz-go (tests/clients/go) when those are built
# (./test.sh --setup-only), then by kafluss-bench, to kafluss and to each reference in
# alternation. kafluss must then hold exactly every record sent (scan row count). Target (docs/benchmarks.md): kcat to kafluss >= 0.9 x kcat
# to tansu.
#   VALUE         json-flat (default; the 5-column flat table) or binary (a BYTES table fed
#                 newline-free text values, since kcat -l sends one line per record)
#   MESSAGE_SIZE  bytes per value (default 100)
#   CLIENTS       the stock clients to run, of "kcat confluent-kafka java franz-go" (default: all)
#   COMPRESSION   the table's table.log.arrow.compression.type (default: the table default, ZSTD)
# shellcheck source-path=SCRIPTDIR disable=SC2119 # start_kafluss takes optional -D settings
source "$(dirname "$0")/lib.sh"
RECORDS=${RECORDS:-200000}
VALUE=${VALUE:-json-flat}
MESSAGE_SIZE=${MESSAGE_SIZE:-100}
case $VALUE in
    json-flat) table_value=json-flat values=json-flat ;;
    binary) table_value=random values=text ;;
    *)
        echo "stock-client.sh: VALUE is json-flat or binary, not $VALUE" >&2
        exit 1
        ;;
esac
if ! command -v kcat >/dev/null; then
    echo "stock-client.sh needs kcat on PATH (Debian/Ubuntu: apt-get install kcat)" >&2
    exit 1
fi
if ! "$PYTHON" -c 'import confluent_kafka' 2>/dev/null; then
    echo "stock-client.sh needs a Python with confluent-kafka: PYTHON=$PYTHON has none" \
        "(./test.sh --setup-only makes .venv with it, or set PYTHON)" >&2
    exit 1
fi
build
start_kafluss
kafluss_sql "$("$BENCH" table-sql --table fluss.stock100 --value "$table_value" --partitions 1)"
if [[ -n ${COMPRESSION:-} ]]; then
    kafluss_sql "ALTER TABLE fluss.stock100 SET ('table.log.arrow.compression.type' = '$COMPRESSION')"
fi
PEERS=${PEERS_STOCK:-sink tansu kafka} start_peers 1 stock100
"$BENCH" values --value "$values" --message-size "$MESSAGE_SIZE" --count "$RECORDS" >"$WORK/values.jsonl"
endpoints=(--endpoint "kafluss=$KAFLUSS_KAFKA=$KAFLUSS_PID")
[[ -n ${SINK_ADDR:-} ]] && endpoints+=(--endpoint "sink=$SINK_ADDR=$SINK_PID")
[[ -n ${MOCK_ADDR:-} ]] && endpoints+=(--endpoint "rdkafka-mock=$MOCK_ADDR=$MOCK_PID")
[[ -n ${TANSU_ADDR:-} ]] && endpoints+=(--endpoint "tansu=$TANSU_ADDR=$TANSU_PID")
[[ -n ${KAFKA_ADDR:-} ]] && endpoints+=(--endpoint "kafka=$KAFKA_ADDR=$KAFKA_PID")
# The suite's Java and Go producers, in their --bench mode, when built.
drivers=()
java_jar=$ROOT/tests/clients/java/target/kafka-4/kafluss-java-producer.jar
go_producer=$ROOT/tests/clients/go/bin/kafluss-go-producer
if [[ -f $java_jar ]] && command -v java >/dev/null; then
    drivers+=(--java "java -jar $java_jar")
else
    log "no Java producer at $java_jar (./test.sh --setup-only builds it): the Java client is left out"
fi
if [[ -x $go_producer ]]; then
    drivers+=(--franz-go "$go_producer")
else
    log "no Go producer at $go_producer (./test.sh --setup-only builds it): franz-go is left out"
fi
# Debian's kcat 1.7.1 comes with librdkafka 2.0.2, which cannot parse tansu 0.6's ApiVersions v3
# answer ("read underflow"); every endpoint gets kcat on the confluent-kafka wheel's librdkafka.
wheel_librdkafka=$("$PYTHON" -c 'import confluent_kafka, glob, os
d = os.path.join(os.path.dirname(os.path.dirname(confluent_kafka.__file__)), "confluent_kafka.libs")
print((glob.glob(os.path.join(d, "librdkafka*.so*")) or [""])[0])')
kcat_lib=()
[[ -n $wheel_librdkafka ]] && kcat_lib=(--kcat-librdkafka "$wheel_librdkafka")
client_args=()
[[ -n ${CLIENTS:-} ]] && client_args=(--clients "$CLIENTS")
"$PYTHON" "$(dirname "$0")/stock_client.py" --topic stock100 --file "$WORK/values.jsonl" "${client_args[@]}" \
    --rounds "$ROUNDS" --out "$RESULTS/stock-client-clients.json" "${kcat_lib[@]}" "${drivers[@]}" "${endpoints[@]}" |
    tee "$RESULTS/stock-client-clients.txt"
compare stock-client-harness --topic stock100 --value "$values" --message-size "$MESSAGE_SIZE" --acks 1 \
    --connections 1 --inflight 5 --batch-records 500 --records "$RECORDS"
clients_sent=$(json_field "$RESULTS/stock-client-clients.json" "sum(r['records'] for r in d['runs'] if r['endpoint'] == 'kafluss')")
clients=$(json_field "$RESULTS/stock-client-clients.json" "' + '.join(d['clients'])")
expected=$((clients_sent + RECORDS * ROUNDS))
stored=$(kafluss_rows fluss.stock100)
echo "kafluss rows stored: $stored, records sent ($clients + kafluss-bench): $expected" |
    tee -a "$RESULTS/stock-client-clients.txt"
[[ $stored -eq $expected ]]

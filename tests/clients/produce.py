#!/usr/bin/env python3
"""Drive one Python-reachable Kafka client through a plan of cases written by the Rust suite.

Usage: produce.py CLIENT PLAN.json, or produce.py exactly-once BOOTSTRAP TOPIC PARTITIONS COUNT
(librdkafka through confluent-kafka), or produce.py exactly-once-kafka-python BOOTSTRAP TOPIC
PARTITIONS COUNT
CLIENT is one of: confluent-kafka, kafka-python, aiokafka, kcat (the `kcat` binary found on PATH or
in $KAFLUSS_KCAT; which librdkafka it loads is decided by the caller's LD_LIBRARY_PATH).

The plan is {"bootstrap": "host:port", "sasl": null | {"username", "password"}, "cases": [...]}.
A case is either
  {"name", "kind": "metadata", "topic", "partitions"}                       (checks Metadata)
  {"name", "kind": "produce", "topic", "compression", "acks", "records",
   "expect_error": bool}                                                    (produces records)
and a record is {"key": b64|null, "value": b64|null, "headers": [[name, b64|null], ...],
"timestamp": ms|null, "partition": int|null}.

For every case one JSON line goes to stdout:
  {"case", "ok", "detail", "started_ms", "finished_ms", "offsets": [...]}
"ok" means the client did what the case expects (delivered every record, or failed when
"expect_error" is set). Whether the rows landed correctly is the Rust side's job (it scans them).
Every wait here is bounded. A plan with "idempotent": false turns idempotence off explicitly in
every producer; with "idempotent": true kafka-python runs with its default (idempotent, no
enable_idempotence line, no retries line) and the others are asked for it: librdkafka (kcat,
confluent-kafka) with enable.idempotence=true, aiokafka with enable_idempotence=True.
"""

import asyncio
import base64
import json
import logging
import os
import subprocess
import sys
import time
import traceback

# Bounds for one case, in seconds. A failing authentication must fail within these too.
DELIVERY_TIMEOUT_S = 20
METADATA_TIMEOUT_S = 10
# A case that must fail (unknown topic, wrong password) gives up sooner.
EXPECTED_FAILURE_TIMEOUT_S = 5
KCAT_TIMEOUT_S = 40


def now_ms():
    return int(time.time() * 1000)


def message_timeout_ms(case):
    """How long a client keeps trying to deliver a record of `case` (None: metadata only)."""
    if case is not None and case.get("expect_error"):
        return EXPECTED_FAILURE_TIMEOUT_S * 1000
    return DELIVERY_TIMEOUT_S * 1000 // 2


def decode(b64):
    return None if b64 is None else base64.b64decode(b64)


def decoded_records(case):
    for record in case["records"]:
        yield {
            "key": decode(record.get("key")),
            "value": decode(record.get("value")),
            "headers": [(name, decode(value)) for name, value in record.get("headers") or []],
            "timestamp": record.get("timestamp"),
            "partition": record.get("partition"),
        }


class CaseFailed(Exception):
    """The client reported an error for the case; the message is what it said."""


# ---------------------------------------------------------------- confluent-kafka (librdkafka)


def idempotent(plan):
    return bool(plan.get("idempotent"))


def confluent_config(plan, case):
    config = {
        "bootstrap.servers": plan["bootstrap"],
        "enable.idempotence": idempotent(plan),
        "message.timeout.ms": message_timeout_ms(case),
        "socket.timeout.ms": DELIVERY_TIMEOUT_S * 1000 // 2,
        "linger.ms": 5,
        "allow.auto.create.topics": False,
    }
    if case is not None:
        config["acks"] = str(case["acks"])
        config["compression.type"] = case["compression"]
    if plan.get("sasl"):
        config.update(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": plan["sasl"]["username"],
                "sasl.password": plan["sasl"]["password"],
            }
        )
    return config


def confluent_metadata(plan, case):
    from confluent_kafka import Producer

    errors = []
    producer = Producer(confluent_config(plan, None), error_cb=lambda e: errors.append(str(e)))
    one = producer.list_topics(topic=case["topic"], timeout=METADATA_TIMEOUT_S)
    topic = one.topics.get(case["topic"])
    if topic is None or topic.error is not None:
        raise CaseFailed(f"metadata for {case['topic']}: {topic and topic.error} {errors}")
    partitions = sorted(topic.partitions)
    every = producer.list_topics(timeout=METADATA_TIMEOUT_S)
    if case["topic"] not in every.topics:
        raise CaseFailed(f"{case['topic']} missing from all-topics metadata: {sorted(every.topics)}")
    return partitions


def confluent_produce(plan, case):
    from confluent_kafka import Producer

    errors = []
    offsets = []
    failures = []

    def delivered(err, msg):
        if err is not None:
            failures.append(str(err))
        else:
            offsets.append(msg.offset())

    producer = Producer(confluent_config(plan, case), error_cb=lambda e: errors.append(str(e)))
    for record in decoded_records(case):
        kwargs = {"value": record["value"], "key": record["key"], "on_delivery": delivered}
        if record["headers"]:
            kwargs["headers"] = record["headers"]
        if record["timestamp"] is not None:
            kwargs["timestamp"] = record["timestamp"]
        if record["partition"] is not None:
            kwargs["partition"] = record["partition"]
        producer.produce(case["topic"], **kwargs)
        producer.poll(0)
    remaining = producer.flush(DELIVERY_TIMEOUT_S)
    if remaining or failures:
        raise CaseFailed(f"{remaining} undelivered, failures {failures[:3]}, client errors {errors[:3]}")
    return offsets


# ---------------------------------------------------------------- kafka-python


def kafka_python_producer(plan, case):
    from kafka import KafkaProducer

    config = {
        "bootstrap_servers": plan["bootstrap"],
        "linger_ms": 5,
        "max_block_ms": min(METADATA_TIMEOUT_S * 1000, message_timeout_ms(case)),
        "bootstrap_timeout_ms": min(METADATA_TIMEOUT_S * 1000, message_timeout_ms(case)),
        "request_timeout_ms": message_timeout_ms(case),
        "allow_auto_create_topics": False,
    }
    if not idempotent(plan):
        # Off explicitly; retries=0 would also turn kafka-python's default idempotence off.
        config.update({"enable_idempotence": False, "retries": 0})
    if case is not None:
        config["acks"] = "all" if case["acks"] == -1 else case["acks"]
        config["compression_type"] = None if case["compression"] == "none" else case["compression"]
    if plan.get("sasl"):
        config.update(
            {
                "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "PLAIN",
                "sasl_plain_username": plan["sasl"]["username"],
                "sasl_plain_password": plan["sasl"]["password"],
            }
        )
    return KafkaProducer(**config)


def kafka_python_metadata(plan, case):
    producer = kafka_python_producer(plan, None)
    try:
        return sorted(producer.partitions_for(case["topic"]))
    finally:
        producer.close(timeout=5)


def kafka_python_produce(plan, case):
    producer = kafka_python_producer(plan, case)
    try:
        futures = [
            producer.send(
                case["topic"],
                value=r["value"],
                key=r["key"],
                headers=r["headers"] or None,
                partition=r["partition"],
                timestamp_ms=r["timestamp"],
            )
            for r in decoded_records(case)
        ]
        producer.flush(timeout=DELIVERY_TIMEOUT_S)
        return [future.get(timeout=DELIVERY_TIMEOUT_S).offset for future in futures]
    finally:
        producer.close(timeout=5)


# ---------------------------------------------------------------- aiokafka


def aiokafka_producer(plan, case):
    from aiokafka import AIOKafkaProducer

    config = {
        "bootstrap_servers": plan["bootstrap"],
        "enable_idempotence": idempotent(plan),
        "linger_ms": 5,
        "request_timeout_ms": message_timeout_ms(case),
    }
    if case is not None:
        config["acks"] = "all" if case["acks"] == -1 else case["acks"]
        config["compression_type"] = None if case["compression"] == "none" else case["compression"]
    if plan.get("sasl"):
        config.update(
            {
                "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "PLAIN",
                "sasl_plain_username": plan["sasl"]["username"],
                "sasl_plain_password": plan["sasl"]["password"],
            }
        )
    return AIOKafkaProducer(**config)


async def aiokafka_metadata_async(plan, case):
    producer = aiokafka_producer(plan, None)
    await asyncio.wait_for(producer.start(), METADATA_TIMEOUT_S)
    try:
        partitions = await asyncio.wait_for(producer.partitions_for(case["topic"]), METADATA_TIMEOUT_S)
        return sorted(partitions)
    finally:
        await asyncio.wait_for(producer.stop(), 5)


async def aiokafka_produce_async(plan, case):
    producer = aiokafka_producer(plan, case)
    await asyncio.wait_for(producer.start(), METADATA_TIMEOUT_S)
    try:
        futures = []
        for r in decoded_records(case):
            futures.append(
                await producer.send(
                    case["topic"],
                    value=r["value"],
                    key=r["key"],
                    headers=r["headers"] or None,
                    partition=r["partition"],
                    timestamp_ms=r["timestamp"],
                )
            )
        results = await asyncio.wait_for(asyncio.gather(*futures), DELIVERY_TIMEOUT_S)
        # With acks=0 aiokafka resolves each send with None: no offset is known.
        return [metadata.offset if metadata is not None else None for metadata in results]
    finally:
        await asyncio.wait_for(producer.stop(), 5)


def aiokafka_metadata(plan, case):
    return asyncio.run(aiokafka_metadata_async(plan, case))


def aiokafka_produce(plan, case):
    return asyncio.run(aiokafka_produce_async(plan, case))


# ---------------------------------------------------------------- kcat

# kcat reads messages from stdin; these delimiters never occur in the suite's kcat payloads.
KCAT_KEY_DELIMITER = b"\x1f"
KCAT_MESSAGE_DELIMITER = b"\x1e"


def kcat_binary():
    return os.environ.get("KAFLUSS_KCAT", "kcat")


def kcat_common_args(plan):
    args = [kcat_binary(), "-b", plan["bootstrap"], "-m", str(METADATA_TIMEOUT_S)]
    if plan.get("sasl"):
        args += [
            "-X", "security.protocol=SASL_PLAINTEXT",
            "-X", "sasl.mechanisms=PLAIN",
            "-X", f"sasl.username={plan['sasl']['username']}",
            "-X", f"sasl.password={plan['sasl']['password']}",
        ]
    return args


def kcat_run(args, stdin=b""):
    done = subprocess.run(args, input=stdin, capture_output=True, timeout=KCAT_TIMEOUT_S)
    stderr = done.stderr.decode("utf-8", "replace").strip()
    return done.returncode, done.stdout, stderr


def kcat_metadata(plan, case):
    code, out, err = kcat_run(kcat_common_args(plan) + ["-L", "-J", "-t", case["topic"]])
    if code != 0:
        raise CaseFailed(f"kcat -L exited {code}: {err[-500:]}")
    topics = {t["topic"]: t for t in json.loads(out)["topics"]}
    topic = topics.get(case["topic"])
    if topic is None or topic.get("error"):
        raise CaseFailed(f"metadata for {case['topic']}: {topic}")
    code, out, err = kcat_run(kcat_common_args(plan) + ["-L", "-J"])
    if code != 0:
        raise CaseFailed(f"kcat -L (all topics) exited {code}: {err[-500:]}")
    every = [t["topic"] for t in json.loads(out)["topics"]]
    if case["topic"] not in every:
        raise CaseFailed(f"{case['topic']} missing from all-topics metadata: {every}")
    return sorted(p["partition"] for p in topic["partitions"])


def kcat_groups(case):
    """kcat applies -H and -p to a whole run: group consecutive records that share them.

    With -K and -Z, an empty key or value before/after the key delimiter is sent as null."""
    groups = []
    for record in decoded_records(case):
        if record["timestamp"] is not None:
            raise CaseFailed("kcat cannot set record timestamps; the plan must not ask for them")
        shape = (tuple(record["headers"]), record["partition"])
        if groups and groups[-1][0] == shape:
            groups[-1][1].append(record)
        else:
            groups.append((shape, [record]))
    return groups


def kcat_produce(plan, case):
    delivered = 0
    for (headers, partition), records in kcat_groups(case):
        args = kcat_common_args(plan) + [
            "-P", "-t", case["topic"],
            "-K", "\\x1f", "-D", "\\x1e", "-Z",
            "-X", f"enable.idempotence={'true' if idempotent(plan) else 'false'}",
            "-X", f"acks={case['acks']}",
            "-X", f"compression.codec={case['compression']}",
            "-X", f"message.timeout.ms={message_timeout_ms(case)}",
        ]
        if partition is not None:
            args += ["-p", str(partition)]
        for name, value in headers:
            if value is None:
                raise CaseFailed("kcat cannot send null header values")
            args += ["-H", f"{name}={value.decode('utf-8')}"]
        payload = b"".join(
            (r["key"] or b"") + KCAT_KEY_DELIMITER + (r["value"] or b"") + KCAT_MESSAGE_DELIMITER
            for r in records
        )
        code, _, err = kcat_run(args, payload)
        # kcat exits 1 when any delivery report carried an error.
        if code != 0:
            raise CaseFailed(f"kcat -P exited {code}: {err[-500:]}")
        delivered += len(records)
    return list(range(delivered))


# ---------------------------------------------------------------- plan runner

CLIENTS = {
    "confluent-kafka": (confluent_metadata, confluent_produce),
    "kafka-python": (kafka_python_metadata, kafka_python_produce),
    "aiokafka": (aiokafka_metadata, aiokafka_produce),
    "kcat": (kcat_metadata, kcat_produce),
}


class RecentLogRecords(logging.Handler):
    """Keeps the clients' warnings: kafka-python and aiokafka log why a connection failed (an
    authentication error, say) but raise only a generic bootstrap error. The first `first`
    lines (why it failed first) and the last `last` (how it ended) are kept."""

    def __init__(self, first=8, last=8):
        super().__init__(level=logging.WARNING)
        self.first = first
        self.last = last
        self.lines = []
        self.dropped = 0

    def emit(self, record):
        self.lines.append(f"{record.name}: {record.getMessage()}"[:300])
        if len(self.lines) > self.first + self.last:
            del self.lines[self.first]
            self.dropped += 1

    def clear(self):
        self.lines.clear()
        self.dropped = 0

    def text(self):
        if not self.dropped:
            return "\n".join(self.lines)
        head, tail = self.lines[: self.first], self.lines[self.first :]
        return "\n".join(head + [f"... ({self.dropped} lines left out)"] + tail)


CLIENT_LOG = RecentLogRecords()
for logger_name in ("kafka", "aiokafka"):
    logging.getLogger(logger_name).addHandler(CLIENT_LOG)
    logging.getLogger(logger_name).propagate = False


def run_case(client, plan, case):
    metadata, produce = CLIENTS[client]
    CLIENT_LOG.clear()
    started = now_ms()
    result = {"case": case["name"], "ok": False, "detail": "", "offsets": []}
    try:
        if case["kind"] == "metadata":
            partitions = metadata(plan, case)
            expected = list(range(case["partitions"]))
            result["ok"] = partitions == expected
            result["detail"] = f"partitions {partitions}, expected {expected}"
        elif case["kind"] == "produce":
            result["offsets"] = produce(plan, case) or []
            result["ok"] = not case.get("expect_error")
            result["detail"] = "delivered" if result["ok"] else "delivered although an error was expected"
        else:
            result["detail"] = f"unknown case kind {case['kind']!r}"
    except Exception as error:  # noqa: BLE001 - every client raises its own types; all are reported
        text = f"{type(error).__name__}: {error}"
        if CLIENT_LOG.lines:
            text += "\nclient log:\n" + CLIENT_LOG.text()
        result["ok"] = bool(case.get("expect_error"))
        # The start says why the case failed first; keep all of it (at most 17 short lines).
        result["detail"] = text[:6000]
        if not result["ok"]:
            traceback.print_exc(file=sys.stderr)
    result["started_ms"] = started
    result["finished_ms"] = now_ms()
    return result


def exactly_once(bootstrap, topic, partitions, count):
    """The exactly-once tests' librdkafka producer (tests/tests/exactly_once.rs): confluent-kafka
    with enable.idempotence=true (acks=all, retries without limit within a 120 s
    message.timeout.ms), one record per id 0..count-1, its value the id in decimal, to partition
    id % partitions of the id % n-th of the n comma-separated topics in `topic` (one, or both
    names of one table), paced at 10 records every 10 ms so the test's faults fall mid-run. Prints
    {"acked": [...], "failed": N, "errors": [...]} as the Java producer's --exactly-once does."""
    from confluent_kafka import Producer

    acked, errors, failed = [], [], [0]

    def delivered(err, msg):
        if err is None:
            acked.append(int(msg.value()))
        else:
            failed[0] += 1
            if len(errors) < 5:
                errors.append(str(err)[:300])

    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "message.timeout.ms": 120000}
    )
    topics = topic.split(",")
    for record in range(count):
        producer.produce(
            topics[record % len(topics)], str(record).encode(), partition=record % partitions, on_delivery=delivered
        )
        producer.poll(0)
        if record % 10 == 9:
            time.sleep(0.01)
    left = producer.flush(180)
    if left:
        errors.append(f"{left} records still queued after the flush")
    print(json.dumps({"acked": acked, "failed": failed[0] + left, "errors": errors}), flush=True)


def exactly_once_kafka_python(bootstrap, topic, partitions, count):
    """The exactly-once tests' kafka-python producer (tests/tests/exactly_once.rs): kafka-python 3
    with its default settings (idempotent, acks=all, retries without limit within the default 120 s
    delivery_timeout_ms), the records, topics, partitions and pacing of `exactly_once` above.
    Prints {"acked": [...], "failed": N, "errors": [...]} as the Java producer's --exactly-once
    does."""
    from kafka import KafkaProducer

    acked, errors, failed = [], [], [0]

    def delivered(record, _metadata):
        acked.append(record)

    def not_delivered(_record, error):
        failed[0] += 1
        if len(errors) < 5:
            errors.append(f"{type(error).__name__}: {error}"[:300])

    producer = KafkaProducer(bootstrap_servers=bootstrap)
    topics = topic.split(",")
    futures = []
    for record in range(count):
        future = producer.send(topics[record % len(topics)], value=str(record).encode(), partition=record % partitions)
        future.add_callback(delivered, record)
        future.add_errback(not_delivered, record)
        futures.append(future)
        if record % 10 == 9:
            time.sleep(0.01)
    try:
        producer.flush(timeout=180)
    except Exception as error:  # KafkaTimeoutError: the records not done count as failed below
        errors.append(f"flush: {type(error).__name__}: {error}"[:300])
    producer.close(timeout=10)
    left = sum(1 for future in futures if not future.is_done)
    if left:
        errors.append(f"{left} records still queued after the flush")
    print(json.dumps({"acked": acked, "failed": failed[0] + left, "errors": errors}), flush=True)


def main():
    if len(sys.argv) == 6 and sys.argv[1] in ("exactly-once", "exactly-once-kafka-python"):
        producer = exactly_once if sys.argv[1] == "exactly-once" else exactly_once_kafka_python
        producer(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        return
    if len(sys.argv) != 3 or sys.argv[1] not in CLIENTS:
        sys.exit(f"usage: produce.py {{{'|'.join(CLIENTS)}}} PLAN.json")
    client, plan_path = sys.argv[1], sys.argv[2]
    with open(plan_path, encoding="utf-8") as plan_file:
        plan = json.load(plan_file)
    for case in plan["cases"]:
        print(json.dumps(run_case(client, plan, case)), flush=True)


if __name__ == "__main__":
    main()

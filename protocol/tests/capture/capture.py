#!/usr/bin/env python3
"""Capture real Kafka client request frames for kafluss-protocol's tests.

Runs a throwaway Kafka-ish listener on 127.0.0.1 (a random port) that answers ApiVersions,
Metadata and Produce just well enough for a producer to send one batch, then makes real clients
(confluent-kafka = librdkafka, kafka-python, aiokafka, kafkajs) produce the same records with every
compression codec. Every request frame (without its 4-byte length prefix) is written to
../data/: `<client>-produce-<codec>.bin` for Produce, `<client>-<api>-v<version>.bin` for the
first ApiVersions/Metadata request of each version.

Usage: .venv/bin/python protocol/tests/capture/capture.py   (needs confluent-kafka, kafka-python,
aiokafka, python-snappy/cramjam, lz4, zstandard; node with the tests/clients npm install for
kafkajs). The Rust tests read the committed files and
need no network.
"""

import asyncio
import os
import socket
import struct
import subprocess
import sys
import threading
import time

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
TOPIC = "capture"
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
BASE_TIMESTAMP = 1_700_000_000_000
NODE_ID = 1

# API key -> (min, max) we advertise: non-flexible Metadata/Produce keep the encoder small.
# Fetch v10 and FindCoordinator v0 are advertised (never called by a producer) because
# librdkafka enables zstd only with Fetch v10 and lz4 only with FindCoordinator: without them it
# silently sends those codecs uncompressed.
ADVERTISED = {0: (3, 7), 1: (0, 10), 3: (1, 8), 10: (0, 0), 18: (0, 3)}
API_NAMES = {0: "produce", 3: "metadata", 18: "api_versions"}


def records():
    """The records every client produces: (key, value, headers, timestamp_ms)."""
    out = []
    # Long, repetitive values so that every codec shrinks the batch: librdkafka sends a batch
    # uncompressed when compression would not make it smaller.
    note = "lorem ipsum dolor sit amet " * 8
    for i in range(10):
        key = None if i == 3 else f"key-{i}".encode()
        value = None if i == 4 else ('{"order_id":%d,"amount":"12.30","note":"%s"}' % (i, note)).encode()
        headers = [("trace", f"t-{i}".encode()), ("kind", b"order")] if i % 2 == 0 else []
        out.append((key, value, headers, BASE_TIMESTAMP + i))
    return out


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def string(s):
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def uvarint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_string(buf, pos):
    (n,) = struct.unpack_from(">h", buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    return buf[pos : pos + n].decode(), pos + n


class Listener:
    def __init__(self, client_name):
        self.client_name = client_name
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.codec = None
        self.produced = threading.Event()
        self.saved = set()
        self.stop = False
        threading.Thread(target=self.accept_loop, daemon=True).start()

    def accept_loop(self):
        self.sock.settimeout(0.5)
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def save(self, name, frame):
        with open(os.path.join(DATA_DIR, name), "wb") as f:
            f.write(frame)

    def serve(self, conn):
        conn.settimeout(30)
        try:
            while True:
                head = self.recv_exact(conn, 4)
                if head is None:
                    return
                (size,) = struct.unpack(">i", head)
                if size < 0 or size > 64 * 1024 * 1024:
                    return
                frame = self.recv_exact(conn, size)
                if frame is None:
                    return
                reply = self.handle(frame)
                if reply is not None:
                    conn.sendall(i32(len(reply)) + reply)
        except (OSError, ValueError):
            return
        finally:
            conn.close()

    @staticmethod
    def recv_exact(conn, n):
        buf = b""
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def handle(self, frame):
        api_key, version, correlation_id = struct.unpack_from(">hhi", frame, 0)
        _client_id, pos = read_string(frame, 8)
        flexible_header = api_key == 18 and version >= 3
        if flexible_header:
            pos += 1  # empty tagged fields (clients send none)
        name = (api_key, version)
        if api_key in (18, 3) and name not in self.saved:
            self.saved.add(name)
            self.save(f"{self.client_name}-{API_NAMES[api_key]}-v{version}.bin", frame)
        if api_key == 18:
            return i32(correlation_id) + self.api_versions(version)
        if api_key == 3:
            return i32(correlation_id) + self.metadata(version, frame, pos)
        if api_key == 0:
            self.save(f"{self.client_name}-produce-{self.codec}.bin", frame)
            body = self.produce_response(version, frame, pos)
            self.produced.set()
            return i32(correlation_id) + body
        raise ValueError(f"unexpected api {api_key}")

    def api_versions(self, version):
        if version > 3:
            # Unknown version: v0 layout with UNSUPPORTED_VERSION, the client retries lower.
            body = i16(35) + i32(len(ADVERTISED))
            for key, (lo, hi) in sorted(ADVERTISED.items()):
                body += i16(key) + i16(lo) + i16(hi)
            return body
        flexible = version >= 3
        body = i16(0)
        body += uvarint(len(ADVERTISED) + 1) if flexible else i32(len(ADVERTISED))
        for key, (lo, hi) in sorted(ADVERTISED.items()):
            body += i16(key) + i16(lo) + i16(hi) + (b"\x00" if flexible else b"")
        if version >= 1:
            body += i32(0)
        if flexible:
            body += b"\x00"
        return body

    def metadata(self, version, frame, pos):
        (count,) = struct.unpack_from(">i", frame, pos)
        pos += 4
        topics = []
        for _ in range(max(count, 0)):
            name, pos = read_string(frame, pos)
            topics.append(name)
        if not topics:
            topics = [TOPIC]
        body = i32(0) if version >= 3 else b""
        body += i32(1) + i32(NODE_ID) + string("127.0.0.1") + i32(self.port) + string(None)
        if version >= 2:
            body += string("capture-cluster")
        body += i32(NODE_ID)
        body += i32(len(topics))
        for name in topics:
            body += i16(0) + string(name) + b"\x00"  # is_internal
            body += i32(1) + i16(0) + i32(0) + i32(NODE_ID)
            if version >= 7:
                body += i32(0)  # leader epoch
            body += i32(1) + i32(NODE_ID) + i32(1) + i32(NODE_ID)
            if version >= 5:
                body += i32(0)  # offline replicas
            if version >= 8:
                body += i32(-2147483648)
        if version >= 8:
            body += i32(-2147483648)
        return body

    def produce_response(self, version, frame, pos):
        _txn, pos = read_string(frame, pos)
        pos += 2 + 4  # acks, timeout
        (topic_count,) = struct.unpack_from(">i", frame, pos)
        pos += 4
        body = i32(topic_count)
        for _ in range(topic_count):
            name, pos = read_string(frame, pos)
            (part_count,) = struct.unpack_from(">i", frame, pos)
            pos += 4
            body += string(name) + i32(part_count)
            for _ in range(part_count):
                (index, size) = struct.unpack_from(">ii", frame, pos)
                pos += 8 + max(size, 0)
                body += i32(index) + i16(0) + i64(0) + i64(-1)
                if version >= 5:
                    body += i64(0)
        body += i32(0)
        return body


def produce_confluent(listener, codec):
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{listener.port}",
            "compression.type": codec,
            "enable.idempotence": False,
            "acks": 1,
            "linger.ms": 100,
            "client.id": "capture-librdkafka",
            "broker.address.family": "v4",
        }
    )
    for key, value, headers, ts in records():
        producer.produce(TOPIC, key=key, value=value, headers=headers or None, timestamp=ts, partition=0)
    remaining = producer.flush(20)
    if remaining:
        raise RuntimeError(f"librdkafka {codec}: {remaining} messages not delivered")


def produce_kafka_python(listener, codec):
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{listener.port}",
        compression_type=None if codec == "none" else codec,
        acks=1,
        linger_ms=100,
        client_id="capture-kafka-python",
        # kafka-python infers the broker release from the advertised APIs and refuses zstd
        # below 2.1; name the release instead.
        api_version=(2, 1, 0),
    )
    futures = [
        producer.send(TOPIC, key=key, value=value, headers=headers, timestamp_ms=ts, partition=0)
        for key, value, headers, ts in records()
    ]
    producer.flush(20)
    for f in futures:
        f.get(timeout=20)
    producer.close(5)


def produce_aiokafka(listener, codec):
    from aiokafka import AIOKafkaProducer

    async def run():
        producer = AIOKafkaProducer(
            bootstrap_servers=f"127.0.0.1:{listener.port}",
            compression_type=None if codec == "none" else codec,
            acks=1,
            linger_ms=100,
            client_id="capture-aiokafka",
            enable_idempotence=False,
        )
        await producer.start()
        try:
            batch = producer.create_batch()
            for key, value, headers, ts in records():
                batch.append(key=key, value=value, timestamp=ts, headers=headers)
            fut = await producer.send_batch(batch, TOPIC, partition=0)
            await fut
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(run(), 30))


def produce_kafkajs(listener, codec):
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "capture_kafkajs.mjs")
    subprocess.run(["node", script, str(listener.port), codec], check=True, timeout=60)


CLIENTS = {
    "librdkafka": produce_confluent,
    "kafka-python": produce_kafka_python,
    "aiokafka": produce_aiokafka,
    "kafkajs": produce_kafkajs,
}


def main():
    os.makedirs(DATA_DIR, exist_ok=True)
    failures = []
    for client, produce in CLIENTS.items():
        listener = Listener(client)
        for codec in CODECS:
            listener.codec = codec
            listener.produced.clear()
            try:
                produce(listener, codec)
                if not listener.produced.wait(5):
                    raise RuntimeError("no produce request seen")
                print(f"captured {client} {codec}")
            except Exception as err:  # report and go on: one client's gap must not hide others
                failures.append(f"{client} {codec}: {err!r}")
                print(f"FAILED {client} {codec}: {err!r}", file=sys.stderr)
        listener.stop = True
        time.sleep(0.1)
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()

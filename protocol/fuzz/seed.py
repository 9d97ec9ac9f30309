#!/usr/bin/env python3
"""Seed the fuzz corpora from the frames captured from real clients (../tests/data).

request_decode: every captured request frame as is; record_batch: the records field of every
captured Produce request; decompress: each compressed batch's records section, prefixed by its
codec id (the target's selector byte); response_decode: nothing captured, left to libFuzzer.
"""

import glob
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data")


def write(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def produce_records(frame):
    """Records fields of a non-flexible (v3-v8) Produce request frame body."""
    _key, _version, _corr = struct.unpack_from(">hhi", frame, 0)
    pos = 8
    (n,) = struct.unpack_from(">h", frame, pos)
    pos += 2 + max(n, 0)  # client id
    (n,) = struct.unpack_from(">h", frame, pos)
    pos += 2 + max(n, 0)  # transactional id
    pos += 6  # acks, timeout
    (topics,) = struct.unpack_from(">i", frame, pos)
    pos += 4
    for _ in range(topics):
        (n,) = struct.unpack_from(">h", frame, pos)
        pos += 2 + n
        (parts,) = struct.unpack_from(">i", frame, pos)
        pos += 4
        for _ in range(parts):
            _index, size = struct.unpack_from(">ii", frame, pos)
            pos += 8
            if size > 0:
                yield frame[pos : pos + size]
                pos += size


for path in sorted(glob.glob(os.path.join(DATA, "*.bin"))):
    name = os.path.basename(path)
    frame = open(path, "rb").read()
    write("request_decode", name, frame)
    if "-produce-" in name:
        for i, records in enumerate(produce_records(frame)):
            write("record_batch", f"{name}-{i}", records)
            attributes = struct.unpack_from(">h", records, 21)[0]
            codec = attributes & 7
            if codec:
                write("decompress", f"{name}-{i}", bytes([codec]) + records[61:])
print("seeded", os.path.join(HERE, "corpus"))

#!/usr/bin/env python3
"""Read a kafluss table straight from its segment files with pyarrow, as a Fluss reader would.

Usage: read_segments.py DATA_DIR DATABASE TABLE

Segments live in DATA_DIR/<db>/<table>-<table_id>/bucket-<n>/ and are named by their base offset;
each must be a complete Arrow IPC stream (pyarrow.ipc.open_stream). Rows are printed as JSON lines
{"bucket": B, "offset": O, "row": {...}} with the same value encoding as the HTTP scan
(interface.md: DECIMAL as a string with its scale, BYTES as base64, TIMESTAMP_LTZ with Z, MAP as an
object), so the Rust suite compares them with the same expectations. Exit 1 with a message when
the table directory or its segments are missing or unreadable.
"""

import base64
import datetime
import decimal
import glob
import json
import os
import sys

import pyarrow as pa
import pyarrow.ipc as ipc


def table_dir(data_dir, database, table):
    candidates = glob.glob(os.path.join(data_dir, database, f"{table}-*"))
    # A table id follows the last dash; a table name may itself contain dashes.
    candidates = [c for c in candidates if os.path.basename(c)[len(table) + 1:].isdigit()]
    if len(candidates) != 1:
        sys.exit(f"expected one directory {data_dir}/{database}/{table}-<id>, found {candidates}")
    return candidates[0]


def segment_base_offset(path):
    stem = os.path.basename(path).split(".")[0]
    if not stem.isdigit():
        sys.exit(f"segment {path} is not named by its base offset")
    return int(stem)


def encode(value, arrow_type):
    """Map one pyarrow Python value to the scan's JSON encoding."""
    if value is None:
        return None
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type) or pa.types.is_fixed_size_binary(arrow_type):
        return base64.b64encode(value).decode("ascii")
    if pa.types.is_decimal(arrow_type):
        return f"{value:.{arrow_type.scale}f}" if isinstance(value, decimal.Decimal) else str(value)
    if pa.types.is_timestamp(arrow_type):
        if isinstance(value, datetime.datetime):
            suffix = "Z" if arrow_type.tz is not None else ""
            text = value.replace(tzinfo=None).isoformat(timespec="milliseconds")
            return text + suffix
        return str(value)
    if pa.types.is_date(arrow_type):
        return value.isoformat()
    if pa.types.is_time(arrow_type):
        return value.isoformat()
    if pa.types.is_map(arrow_type):
        return {k: encode(v, arrow_type.item_type) for k, v in value}
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return [encode(v, arrow_type.value_type) for v in value]
    if pa.types.is_struct(arrow_type):
        return {
            arrow_type.field(i).name: encode(value.get(arrow_type.field(i).name), arrow_type.field(i).type)
            for i in range(arrow_type.num_fields)
        }
    if isinstance(value, decimal.Decimal):
        return str(value)
    return value


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: read_segments.py DATA_DIR DATABASE TABLE")
    root = table_dir(*sys.argv[1:])
    buckets = sorted(glob.glob(os.path.join(root, "bucket-*")), key=lambda p: int(p.rsplit("-", 1)[1]))
    segments_seen = 0
    for bucket_path in buckets:
        bucket = int(bucket_path.rsplit("-", 1)[1])
        segments = sorted(glob.glob(os.path.join(bucket_path, "*.arrow")), key=segment_base_offset)
        for segment in segments:
            segments_seen += 1
            try:
                with ipc.open_stream(segment) as reader:
                    table = reader.read_all()
            except (pa.ArrowInvalid, OSError) as error:
                sys.exit(f"segment {segment} is not a readable Arrow IPC stream: {error}")
            offset = segment_base_offset(segment)
            schema = table.schema
            for row in table.to_pylist():
                encoded = {field.name: encode(row[field.name], field.type) for field in schema}
                print(json.dumps({"bucket": bucket, "offset": offset, "row": encoded}))
                offset += 1
    if segments_seen == 0:
        sys.exit(f"no *.arrow segment under {root}")


if __name__ == "__main__":
    main()

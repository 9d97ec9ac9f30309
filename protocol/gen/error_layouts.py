#!/usr/bin/env python3
"""Writes protocol/src/error_response/layouts.rs from Kafka's response message definitions.

    python3 protocol/gen/error_layouts.py SOURCE [--output FILE]

SOURCE is a kafka-clients jar (the definitions are its `common/message/*Response.json`) or a
directory holding those files (directly, or under `common/message/`). The table is written to
FILE, else to standard output. The checked-in table was made from kafka-clients-4.4.0.jar; the
test suite (`./test.sh`) installs that jar at tests/kafka/target/lib/, and the protocol crate's
test `error_layouts::generated_table_is_up_to_date` runs this script on it.

For each response API key with versions (ControlledShutdown, LeaderAndIsr, StopReplica and
UpdateMetadata have none in Kafka 4): its name, valid and flexible versions, and its top-level
fields in order (type, versions, nullable versions, tagged versions, JSON default), with the
fields of every top-level struct that is not an array (recursively). Array elements are not
described: the error response writes every array empty. Python 3 standard library only.
"""

import argparse
import glob
import json
import os
import re
import sys
import zipfile

MAX = 32767  # i16::MAX: the end of an open version range ("3+")

PRIMITIVES = {
    "bool": "Bool",
    "int8": "Int8",
    "int16": "Int16",
    "uint16": "Uint16",
    "int32": "Int32",
    "uint32": "Uint32",
    "int64": "Int64",
    "float64": "Float64",
    "uuid": "Uuid",
    "string": "String",
    "bytes": "Bytes",
    "records": "Records",
}


def strip_comments(text):
    """Removes // and /* */ comments outside JSON strings (Kafka's files carry a licence header)."""
    out = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ValueError("unterminated /* comment")
            i = end + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def read_definitions(source):
    """(file name, text) of every *Response.json of SOURCE, sorted by name."""
    pattern = re.compile(r"(?:^|/)common/message/([A-Za-z0-9]+Response\.json)$")
    found = []
    if os.path.isdir(source):
        directory = source
        if os.path.isdir(os.path.join(source, "common", "message")):
            directory = os.path.join(source, "common", "message")
        for path in glob.glob(os.path.join(directory, "*Response.json")):
            with open(path, encoding="utf-8") as f:
                found.append((os.path.basename(path), f.read()))
    else:
        with zipfile.ZipFile(source) as jar:
            for name in jar.namelist():
                match = pattern.search(name)
                if match:
                    found.append((match.group(1), jar.read(name).decode("utf-8")))
    if not found:
        raise SystemExit(f"error_layouts.py: no common/message/*Response.json in {source}")
    return sorted(found)


def versions(spec, what):
    """Kafka's version spec ("3", "1-4", "2+", "none") as an inclusive (min, max)."""
    spec = (spec or "none").strip()
    if spec == "none":
        return None
    m = re.fullmatch(r"(\d+)\+", spec)
    if m:
        return (int(m.group(1)), MAX)
    m = re.fullmatch(r"(\d+)-(\d+)", spec)
    if m:
        return (int(m.group(1)), int(m.group(2)))
    m = re.fullmatch(r"\d+", spec)
    if m:
        return (int(spec), int(spec))
    raise SystemExit(f"error_layouts.py: {what}: cannot read version spec {spec!r}")


def rust_versions(rng):
    if rng is None:
        return "NONE"
    low, high = rng
    return f"from({low})" if high == MAX else f"v({low}, {high})"


def default_value(field, kind, what):
    """The JSON default of a number or bool as an integer (0 when absent or null)."""
    raw = field.get("default")
    if raw is None or raw == "null":
        return 0
    if kind == "Bool":
        if raw in (True, "true"):
            return 1
        if raw in (False, "false"):
            return 0
    elif kind in ("String", "Bytes", "Records", "Uuid", "Array", "Struct"):
        return 0
    else:
        text = str(raw).strip()
        try:
            value = int(text, 16) if text.lower().startswith(("0x", "-0x")) else int(text)
        except ValueError:
            if kind == "Float64" and float(text) == int(float(text)):
                return int(float(text))
            raise SystemExit(f"error_layouts.py: {what}: default {raw!r} is not an integer")
        return value
    raise SystemExit(f"error_layouts.py: {what}: default {raw!r} of a {kind}")


def fields_rust(fields, common, message, indent, path):
    lines = []
    for field in fields:
        name = field["name"]
        what = f"{message}.{path}{name}"
        ty = field["type"]
        struct_fields = None
        if ty.startswith("[]"):
            kind = "Array"
        elif ty in PRIMITIVES:
            kind = PRIMITIVES[ty]
        else:
            kind = "Struct"
            struct_fields = field.get("fields")
            if struct_fields is None:
                if ty not in common:
                    raise SystemExit(f"error_layouts.py: {what}: unknown type {ty!r}")
                struct_fields = common[ty].get("fields", [])
        field_versions = versions(field.get("versions"), what)
        nullable = versions(field.get("nullableVersions"), what)
        tagged = versions(field.get("taggedVersions"), what)
        default = default_value(field, kind, what)
        pad = " " * indent
        if kind == "Struct":
            ty_rust = "Struct(&[\n"
            ty_rust += "".join(
                fields_rust(struct_fields, common, message, indent + 4, f"{path}{name}.")
            )
            ty_rust += pad + "])"
        else:
            ty_rust = kind
        lines.append(
            f"{pad}f({json.dumps(name)}, {ty_rust}, {rust_versions(field_versions)}, "
            f"{rust_versions(nullable)}, {rust_versions(tagged)}, {default}),\n"
        )
    return lines


def kafka_version(source):
    """The version in a jar's kafka/kafka-version.properties, else None."""
    if os.path.isdir(source):
        return None
    with zipfile.ZipFile(source) as jar:
        try:
            text = jar.read("kafka/kafka-version.properties").decode("utf-8")
        except KeyError:
            return None
    m = re.search(r"(?m)^version=(\S+)", text)
    return m.group(1) if m else None


def generate(source):
    layouts = []
    for file_name, text in read_definitions(source):
        definition = json.loads(strip_comments(text))
        if definition.get("type") != "response":
            continue
        valid = versions(definition.get("validVersions"), file_name)
        if valid is None:
            continue
        name = definition["name"]
        if not name.endswith("Response"):
            raise SystemExit(f"error_layouts.py: {file_name}: name {name!r}")
        common = {s["name"]: s for s in definition.get("commonStructs", [])}
        layouts.append((definition["apiKey"], name[: -len("Response")], valid, definition, common))
    layouts.sort(key=lambda layout: layout[0])
    keys = [layout[0] for layout in layouts]
    if len(set(keys)) != len(keys):
        raise SystemExit("error_layouts.py: an API key is defined twice")

    version = kafka_version(source)
    origin = f"Kafka {version}'s" if version else "Kafka's"
    out = [
        f"// Generated by protocol/gen/error_layouts.py from {origin} common/message/*Response.json;\n",
        "// do not edit: run the script again (see its header).\n",
        "\n",
        "use super::FieldType::*;\n",
        "use super::{f, from, layout, v, ResponseLayout, NONE};\n",
        "\n",
        "// layout(api key, name, valid versions, flexible versions, fields);\n",
        "// f(name, type, versions, nullable versions, tagged versions, default)\n",
        "\n",
        "/// Every response API key with versions, sorted by key.\n",
        "pub static LAYOUTS: &[ResponseLayout] = &[\n",
    ]
    for api_key, name, valid, definition, common in layouts:
        flexible = versions(definition.get("flexibleVersions"), name)
        out.append(
            f"    layout({api_key}, {json.dumps(name)}, {rust_versions(valid)}, "
            f"{rust_versions(flexible)}, &[\n"
        )
        out.extend(fields_rust(definition.get("fields", []), common, name, 8, ""))
        out.append("    ]),\n")
    out.append("];\n")
    return "".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="a kafka-clients jar, or a directory of *Response.json")
    parser.add_argument("--output", help="the file to write (default: standard output)")
    args = parser.parse_args()
    text = generate(args.source)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()

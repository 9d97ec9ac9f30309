#!/usr/bin/env python3
"""Writes seed inputs for `convert_batch` into corpus/convert_batch/: JSON documents (valid,
rescued, invalid) under each plan selector, separated like the target splits records. Besides
DOCS below, every JSON object written as a raw string literal (`r#"{...}"#`, `br#"{...}"#`) in
the conversion tests (`convert/tests/*.rs`) and the bench workloads is a document too."""
import glob
import os
import re

SEP = b"\xfe"
DOCS = [
    b'{"bool":true,"i8":127,"i16":-32768,"i32":1,"i64":9223372036854775807,"f32":1.5,"f64":1e308}',
    b'{"dec":"12.30","dec38":1.5e2,"ch":"abc","s":"x\\u00e9\\ud83d\\ude00","bin":"AAE=","bytes":"AQID"}',
    b'{"date":"2024-02-29","time":"12:34:56.789","ts":"2024-02-29T12:00:00.123456","ltz":1700000000000}',
    b'{"xs":[[1,2],[null],[]],"m":{"k":{"s":"v","q":1},"n":null},"r":{"s":"y","q":-1},"zz":[1,{"a":2}]}',
    b'{"i8":128,"dec":1.234,"bin":"AA==","_kafka_key":1,"_kafka_rescue":null}',
    b'{"a":1,"a":2}',
    b'{"x":{"k":1,"k":2}}',
    b'{"s":"\\udc00"}',
    b'[1]',
    b'',
    b'{"xs":[[1e309]]}',
    # Scalar fields in column order, then shuffled and with an unknown member: the one-pass
    # path's common case and two of its fallbacks.
    b'{"bool":false,"i8":-1,"i16":300,"i32":-7,"i64":123456789012345678,"f32":0.25,"f64":-2.5e-3,'
    b'"dec":"1.20","dec38":12345678901234567890.5,"ch":"ab","s":"t","date":"2024-01-01",'
    b'"time":"01:02:03","ts":"2024-01-01T00:00:00","ltz":0}',
    b'{"s":"z","i32":2147483647,"dec":99999999.99,"bool":null,"other":[1]}',
]


def test_documents(convert_dir):
    """JSON objects in raw string literals of the conversion tests and benches (raw strings hold
    no escapes, so their text is the document), each once, in a stable order."""
    docs = set()
    for path in glob.glob(os.path.join(convert_dir, "tests", "*.rs")) + glob.glob(
        os.path.join(convert_dir, "benches", "**", "*.rs"), recursive=True
    ):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for match in re.finditer(r'b?r#"(\{.*?\})"#', text, re.S):
            docs.add(match.group(1).encode("utf-8"))
    return sorted(docs)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.join(here, "corpus", "convert_batch")
    os.makedirs(out, exist_ok=True)
    n = 0
    for control in range(0, 256, 37):
        for doc in DOCS + test_documents(os.path.dirname(here)):
            parts = []
            if control & 0x80:
                parts.append(b"key")
            if control & 0x40:
                parts += [b"h", b"v"]
            parts.append(doc)
            data = bytes([control]) + SEP.join(parts + parts)
            with open(os.path.join(out, f"seed-{n:03}"), "wb") as f:
                f.write(data)
            n += 1
    print(f"{n} seeds in {out}")


if __name__ == "__main__":
    main()

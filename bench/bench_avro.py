"""Avro value decoding: AvroDecoder's compiled kernel against fastavro (issue 38, item 7).

One run, one generated data set: ``--records`` values (200,000 by default) of a 12-field
record -- a nested record (with a nullable field), an array of longs, a union with null, a
decimal, a timestamp, an enum, a map and primitives -- encoded by fastavro and framed as
the schema registry frames them (magic 0, 4-byte id). Contenders:

* ours: ``AvroDecoder.decode`` of the binary column into one Arrow struct column;
* fastavro: its ``schemaless_reader`` per value (after cutting the 5-byte frame) into a
  list of dicts, then ``pa.Table.from_pylist`` with the same Arrow schema (what a user
  without this project writes).

Both must give the same table (checked once before timing). Each contender runs
``--repeat`` interleaved rounds; records/s and the ratio come from the median CPU time of
the process (the machine is shared; wall time is printed too). Ours is single-threaded.
Run with ``nice`` on a shared machine: ``python bench/bench_avro.py``.
"""
from __future__ import annotations

import os

# numpy's OpenBLAS worker threads spin for a while after start-up and their CPU time is
# the process's: one thread, so process_time measures the decoders alone
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import datetime  # noqa: E402
import decimal  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import struct  # noqa: E402
import sys  # noqa: E402

import fastavro  # noqa: E402
import pyarrow as pa  # noqa: E402

from spark_kafkalog.typed.avro import AvroDecoder  # noqa: E402

from _timing import medians, print_rates, print_ratio  # noqa: E402  (bench/, the script's folder)

SCHEMA = {
    "type": "record", "name": "Event", "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "user", "type": {"type": "record", "name": "User", "fields": [
            {"name": "name", "type": "string"},
            {"name": "age", "type": "int"},
            {"name": "email", "type": ["null", "string"]}]}},
        {"name": "scores", "type": {"type": "array", "items": "long"}},
        {"name": "comment", "type": ["null", "string"], "default": None},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal",
                                    "precision": 12, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind",
                                  "symbols": ["VIEW", "CLICK", "BUY"]}},
        {"name": "ratio", "type": "double"},
        {"name": "ok", "type": "boolean"},
        {"name": "attrs", "type": {"type": "map", "values": "string"}},
        {"name": "count", "type": "int"},
        {"name": "source", "type": "string"},
    ],
}
SCHEMA_ID = 7


def records(n):
    base = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    for i in range(n):
        yield {
            "id": i * 7919, "user": {"name": f"user{i % 1000}", "age": 18 + i % 60,
                                     "email": None if i % 3 else f"u{i}@example.com"},
            "scores": [i % 100, i % 7, -(i % 13)][: i % 4],
            "comment": None if i % 2 else "fine",
            "amount": decimal.Decimal(i % 100000) / 100,
            "at": base + datetime.timedelta(microseconds=i * 1000),
            "kind": ("VIEW", "CLICK", "BUY")[i % 3], "ratio": i / 7, "ok": i % 5 == 0,
            "attrs": {"k": "v"} if i % 4 == 0 else {}, "count": i % 1000,
            "source": "web" if i % 2 else "app",
        }


def encode(n):
    parsed = fastavro.parse_schema(SCHEMA)
    frame = b"\x00" + struct.pack(">I", SCHEMA_ID)
    out = []
    for rec in records(n):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, rec)
        out.append(frame + buf.getvalue())
    return pa.array(out, type=pa.binary())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)

    values = encode(args.records)
    dec = AvroDecoder(json.dumps(SCHEMA), {SCHEMA_ID: json.dumps(SCHEMA)})
    parsed = fastavro.parse_schema(SCHEMA)
    schema = pa.schema([pa.field(f.name, f.type, f.nullable) for f in dec.arrow_type])

    def ours():
        return dec.decode(values).array

    def theirs():
        rows = [fastavro.schemaless_reader(io.BytesIO(v[5:]), parsed)
                for v in values.to_pylist()]
        return pa.Table.from_pylist(rows, schema=schema)

    a, b = ours(), theirs()
    if not pa.Table.from_struct_array(a).equals(b):
        sys.exit("bench_avro: the two decoders disagree")
    med = medians({"ours": ours, "fastavro": theirs}, args.repeat)
    n = args.records
    print(f"Avro decode, {n:,} records of 12 fields ({values.nbytes / n:.0f} bytes each "
          f"framed), median of {args.repeat} rounds")
    print_rates(med, n, 9, 2)
    print_ratio(med, "fastavro")
    ratio = med["fastavro"][1] / med["ours"][1]
    print(f"  goal >= 5 M records/s: {'met' if n / med['ours'][1] >= 5e6 else 'NOT met'}; "
          f"goal >= 10x fastavro: {'met' if ratio >= 10 else 'NOT met'}")


if __name__ == "__main__":
    main()

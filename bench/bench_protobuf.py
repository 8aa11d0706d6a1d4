"""Protobuf value decoding: ProtobufDecoder's compiled kernel against the protobuf package
(issue 38, item 7: goal >= 5x).

One run, one generated data set: ``--records`` values (200,000 by default) of a 12-field
message -- a nested message (with an optional field), a repeated int64, an optional string,
a Timestamp, an enum, a map, a double, a bool, an int32, a sint64, bytes and a string --
serialized by classes protoc generates at start and framed as Confluent's serializers frame
them (magic 0, 4-byte id, message indexes ``[0]``). Contenders:

* ours: ``ProtobufDecoder.decode`` of the binary column into one Arrow struct column;
* protobuf: ``FromString`` per value (after the 6-byte frame) into a dict per row by a
  hand-written converter of Spark's rules (the fastest Python a user would write), then
  ``pa.Table.from_pylist`` with the same Arrow schema.

Both must give the same table (checked once before timing). Each contender runs
``--repeat`` interleaved rounds; records/s and the ratio come from the median CPU time of
the process (the machine is shared; wall time is printed too). Ours is single-threaded.
Run with ``nice`` on a shared machine: ``python bench/bench_protobuf.py``.
"""
from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa

from spark_kafkalog.typed.protobuf import ProtobufDecoder

from _timing import medians, print_rates, print_ratio  # bench/, the script's folder

PROTO = """
syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
message Event {
  enum Kind { VIEW = 0; CLICK = 1; BUY = 2; }
  message User { string name = 1; int32 age = 2; optional string email = 3; }
  int64 id = 1;
  User user = 2;
  repeated int64 scores = 3;
  optional string comment = 4;
  google.protobuf.Timestamp at = 5;
  Kind kind = 6;
  double ratio = 7;
  bool ok = 8;
  map<string, string> attrs = 9;
  int32 count = 10;
  sint64 delta = 11;
  string source = 12;
}
"""
SCHEMA_ID = 7


def generated(tmp: Path):
    (tmp / "bench_event.proto").write_text(PROTO)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}",
                    f"--python_out={tmp}", "bench_event.proto"], check=True)
    sys.path.insert(0, str(tmp))
    return importlib.import_module("bench_event_pb2")


def encode(mod, n):
    frame = b"\x00" + SCHEMA_ID.to_bytes(4, "big") + b"\x00"
    out = []
    for i in range(n):
        m = mod.Event(id=i * 7919, kind=i % 3, ratio=i / 7, ok=i % 5 == 0, count=i % 1000,
                      delta=-(i % 77), source="web" if i % 2 else "app")
        m.user.name = f"user{i % 1000}"
        m.user.age = 18 + i % 60
        if i % 3 == 0:
            m.user.email = f"u{i}@example.com"
        m.scores.extend([i % 100, i % 7, -(i % 13)][: i % 4])
        if i % 2 == 0:
            m.comment = "fine"
        m.at.seconds = 1_704_067_200 + i
        m.at.nanos = (i % 1000) * 1000
        if i % 4 == 0:
            m.attrs["k"] = "v"
        out.append(frame + m.SerializeToString())
    return pa.array(out, type=pa.binary())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        mod = generated(Path(tmp))
    values = encode(mod, args.records)
    dec = ProtobufDecoder(PROTO, {SCHEMA_ID: PROTO})
    schema = pa.schema([pa.field(f.name, f.type, f.nullable) for f in dec.arrow_type])
    kinds = {v.number: v.name for v in mod.Event.Kind.DESCRIPTOR.values}
    Event = mod.Event

    def ours():
        return dec.decode(values).array

    def theirs():
        rows = []
        for v in values.to_pylist():
            m = Event.FromString(v[6:])
            u = m.user
            rows.append({
                "id": m.id or None,
                "user": {"name": u.name or None, "age": u.age or None,
                         "email": u.email if u.HasField("email") else None}
                if m.HasField("user") else None,
                "scores": list(m.scores),
                "comment": m.comment if m.HasField("comment") else None,
                "at": m.at.seconds * 1_000_000 + m.at.nanos // 1000
                if m.HasField("at") else None,
                "kind": kinds[m.kind] if m.kind else None,
                "ratio": m.ratio or None, "ok": m.ok or None,
                "attrs": list(m.attrs.items()), "count": m.count or None,
                "delta": m.delta or None, "source": m.source or None,
            })
        return pa.Table.from_pylist(rows, schema=schema)

    a, b = ours(), theirs()
    if not pa.Table.from_struct_array(a).equals(b):
        sys.exit("bench_protobuf: the two decoders disagree")
    med = medians({"ours": ours, "protobuf": theirs}, args.repeat)
    n = args.records
    print(f"Protobuf decode, {n:,} records of 12 fields ({values.nbytes / n:.0f} bytes each "
          f"framed), median of {args.repeat} rounds")
    print_rates(med, n, 9, 2)
    print_ratio(med, "protobuf")
    ratio = med["protobuf"][1] / med["ours"][1]
    print(f"  goal >= 5x the protobuf package: {'met' if ratio >= 5 else 'NOT met'}")


if __name__ == "__main__":
    main()

"""Protobuf value encoding: ProtobufEncoder's compiled kernel against the protobuf package
and against the NumPy/Arrow encoder it replaced (issue 38, item 6).

One run, one generated data set: ``--records`` rows (100,000 by default) of an 18-field
message -- a nested message (with an optional field), repeated messages (with a repeated
string), a repeated int64, an enum, a Timestamp, a Duration, a double, a float, a bool, a
map, a sint64, a fixed32, bytes, a StringValue wrapper and a two-member oneof -- as one
Arrow struct column (Spark's ``from_protobuf`` type of the message). Contenders, each
writing every row framed as Confluent's serializer frames it (magic 0, 4-byte id, message
indexes ``[0]``):

* ours: ``ProtobufEncoder.encode`` of the struct column into one binary column;
* protobuf: ``SerializeToString`` per message, the messages built beforehand from the same
  rows (not timed; "build + serialize" below times building them from the rows too);
* old: the NumPy/Arrow encoder (``binary_join_element_wise`` per field) as of git
  revision ``--old`` (loaded from git history; skipped outside a git checkout).

All must give the same bytes (checked once before timing). Each contender runs
``--repeat`` interleaved rounds; records/s come from the median CPU time of the process
(the machine is shared; wall time is printed too, and the load average). Single-threaded.
Run with ``nice`` on a shared machine: ``python bench/bench_proto_write.py``.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa

from spark_kafkalog.typed.proto_write import ProtobufEncoder
from spark_kafkalog.typed.protobuf import ProtobufDecoder

from _timing import medians, print_rates, print_ratio  # bench/, the script's folder

PROTO = """
syntax = "proto3";
package benchw;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
message Order {
  enum Status { NEW = 0; PAID = 1; SHIPPED = 2; CANCELLED = 3; }
  message Address { string street = 1; string city = 2; string zip = 3;
                    optional string country = 4; }
  message Line { string sku = 1; int32 qty = 2; double price = 3; repeated string tags = 4; }
  int64 id = 1;
  string customer = 2;
  Address ship_to = 3;
  repeated Line lines = 4;
  repeated int64 coupons = 5;
  Status status = 6;
  google.protobuf.Timestamp created = 7;
  google.protobuf.Duration ttl = 8;
  double total = 9;
  float discount = 10;
  bool gift = 11;
  map<string, string> attrs = 12;
  sint64 delta = 13;
  fixed32 region = 14;
  bytes token = 15;
  google.protobuf.StringValue note = 16;
  oneof payment { string card = 17; int64 account = 18; }
}
"""
SCHEMA_ID = 7
#: the last revision with the NumPy/Arrow encoder
OLD_REV = "1cc4995"
STATUS = ["NEW", "PAID", "SHIPPED", "CANCELLED"]


def generated(tmp: Path):
    (tmp / "bench_order.proto").write_text(PROTO)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}",
                    f"--python_out={tmp}", "bench_order.proto"], check=True)
    sys.path.insert(0, str(tmp))
    return importlib.import_module("bench_order_pb2")


def rows(n):
    """Spark rows of the message (times as int64 microseconds)."""
    out = []
    for i in range(n):
        out.append({
            "id": i * 7919, "customer": f"customer-{i % 5000}",
            "ship_to": {"street": f"{i % 999} Main St", "city": "Springfield",
                        "zip": f"{10000 + i % 89999}",
                        "country": "US" if i % 3 else None},
            "lines": [{"sku": f"sku-{(i + k) % 1000}", "qty": 1 + k, "price": 9.99 * (k + 1),
                       "tags": ["new", "sale"][: (i + k) % 3]} for k in range(i % 4)],
            "coupons": [i % 100, i % 7][: i % 3],
            "status": STATUS[i % 4] if i % 4 else None,
            "created": (1_704_067_200 + i) * 1_000_000 + (i % 1000),
            "ttl": (i % 3600) * 1_000_000 if i % 5 else None,
            "total": i / 7 if i % 9 else None, "discount": 0.25 if i % 2 else None,
            "gift": True if i % 6 == 0 else None,
            "attrs": [("channel", "web")] if i % 4 == 0 else [],
            "delta": -(i % 77) or None, "region": i % 64 or None,
            "token": (i * 2654435761 % 2**32).to_bytes(4, "little"),
            "note": {"value": "leave at door"} if i % 10 == 0 else None,
            "card": f"4111-{i % 10000:04d}" if i % 2 else None,
            "account": i if i % 2 == 0 else None,
        })
    return out


def message(Order, r):
    """The message of Spark row ``r`` (None fields unset)."""
    m = Order(id=r["id"], customer=r["customer"], total=r["total"] or 0.0,
              discount=r["discount"] or 0.0, gift=bool(r["gift"]), delta=r["delta"] or 0,
              region=r["region"] or 0, token=r["token"],
              status=STATUS.index(r["status"]) if r["status"] else 0)
    a = r["ship_to"]
    m.ship_to.street, m.ship_to.city, m.ship_to.zip = a["street"], a["city"], a["zip"]
    if a["country"] is not None:
        m.ship_to.country = a["country"]
    for ln in r["lines"]:
        m.lines.add(sku=ln["sku"], qty=ln["qty"], price=ln["price"], tags=ln["tags"])
    m.coupons.extend(r["coupons"])
    m.created.seconds, micros = divmod(r["created"], 1_000_000)
    m.created.nanos = micros * 1000
    if r["ttl"] is not None:
        m.ttl.seconds, micros = divmod(r["ttl"], 1_000_000)
        m.ttl.nanos = micros * 1000
    for k, v in r["attrs"]:
        m.attrs[k] = v
    if r["note"] is not None:
        m.note.value = r["note"]["value"]
    if r["card"] is not None:
        m.card = r["card"]
    if r["account"] is not None:
        m.account = r["account"]
    return m


def old_encoder(rev: str):
    """``ProtobufEncoder`` as of git revision ``rev`` (None outside a git checkout)."""
    root = Path(__file__).resolve().parent.parent
    try:
        text = subprocess.run(["git", "-C", str(root), "show",
                               f"{rev}:spark_kafkalog/typed/proto_write.py"],
                              check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    path = Path(tempfile.mkdtemp()) / "old_proto_write.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("old_proto_write", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.ProtobufEncoder


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--old", default=OLD_REV, help="git revision of the old encoder")
    ap.add_argument("--batch", type=int, default=0,
                    help="encode the column in slices of this many rows (Spark's Arrow "
                         "batches are 10,000); 0: in one call")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        mod = generated(Path(tmp))
    Order = mod.Order
    t = ProtobufDecoder(PROTO).arrow_type
    data = rows(args.records)
    ints = pa.struct([pa.field(f.name, pa.int64() if f.name in ("created", "ttl") else f.type)
                      for f in t])
    column = pa.array(data, ints).cast(t)
    msgs = [message(Order, r) for r in data]
    frame = b"\x00" + SCHEMA_ID.to_bytes(4, "big") + b"\x00"
    ours_enc = ProtobufEncoder(PROTO, t, SCHEMA_ID)
    Old = old_encoder(args.old)
    old_enc = Old(PROTO, t, SCHEMA_ID) if Old else None

    step = args.batch or len(column)
    slices = [column.slice(k, step) for k in range(0, len(column), step)]

    def batched(enc):
        return lambda: [enc.encode(b) for b in slices]

    contenders = {
        "ours": batched(ours_enc),
        "protobuf": lambda: [frame + m.SerializeToString() for m in msgs],
        "protobuf build+serialize": lambda: [frame + message(Order, r).SerializeToString()
                                             for r in data],
    }
    if old_enc is not None:
        contenders["old (NumPy/Arrow)"] = batched(old_enc)
    want = contenders["protobuf"]()
    for name, fn in contenders.items():
        got = fn()
        if isinstance(got[0], pa.Array):
            got = pa.concat_arrays(got).to_pylist()
        if got != want:
            sys.exit(f"bench_proto_write: {name} does not write protobuf's bytes")
    med = medians(contenders, args.repeat)
    n = args.records
    size = sum(map(len, want)) / n
    print(f"Protobuf encode, {n:,} records of 18 fields ({size:.0f} bytes each framed), "
          f"in calls of {step:,} rows, median of {args.repeat} rounds; load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores")
    print_rates(med, n, 26, 3)
    for name in med:
        if name != "ours":
            print_ratio(med, name)
    if old_enc is None:
        print(f"  old encoder: not run (no git revision {args.old} here)")


if __name__ == "__main__":
    main()

"""Log dirs for the Protobuf and JSON Schema typed-read tests: a ``_schemas`` topic (records as
Confluent's KafkaStore writes them, tests/typed/registry_records.py) with PROTOBUF and JSON
subjects, and data topics whose values the ``protobuf`` package (classes protoc generates
into a temporary dir) and ``json.dumps`` encode, framed as Confluent's serializers frame
them (magic 0, 4-byte big-endian id; Protobuf then the message indexes). The expected rows
come from the same packages parsing the bytes back (tests/typed/proto_oracle.py applies
Spark's from_protobuf rules), never from spark_kafkalog."""
from __future__ import annotations

import datetime as dt
import json

from tests.log.logbuilder import LogDirBuilder, rec
from tests.typed import registry_records as rr
from tests.typed.proto_oracle import compile_module, frame, parse, spark_value

PAY_V1 = ('syntax = "proto3";\npackage kl.pay;\n\n'
          'message Payment {\n  string id = 1;\n  double amount = 2;\n}\n')
# v2: a message before Payment (so Payment's message index is [1], and the file's first
# message is Refund), a repeated field and a nested message added
PAY_V2 = ('syntax = "proto3";\npackage kl.pay;\n\n'
          'message Refund {\n  string id = 1;\n  int64 cents = 2;\n}\n\n'
          'message Payment {\n  string id = 1;\n  double amount = 2;\n'
          '  repeated string tags = 3;\n  Meta meta = 4;\n'
          '  message Meta {\n    string source = 1;\n  }\n}\n')
EV_V1 = json.dumps({"type": "object", "properties": {
    "kind": {"type": "string"}, "n": {"type": "integer"}}})
EV_V2 = json.dumps({"type": "object", "properties": {
    "kind": {"type": "string"}, "n": {"type": "integer"},
    "at": {"type": "string", "format": "date-time"},
    "tags": {"type": "array", "items": {"type": "string"}}}})
EV_KEY = json.dumps({"type": "object", "properties": {"user": {"type": "string"}}})
MIXED_AVRO = json.dumps({"type": "record", "name": "M", "fields": [
    {"name": "id", "type": "long"}]})
MIXED_PROTO = 'syntax = "proto3";\npackage kl.m;\nmessage M {\n  int64 id = 1;\n}\n'

PAYMENT = "kl.pay.Payment"
#: Confluent's message indexes: [0] is written as the single byte 0; Payment in v2 is [1]
#: (a count of 1, then 1, both zigzag varints)
FIRST, SECOND = b"\x00", b"\x02\x02"


def registry_records() -> list[tuple[bytes, bytes | None]]:
    return [
        (rr.subject_key("CONFIG"), rr.config_value("BACKWARD")),
        (rr.schema_key("pay-value", 1),
         rr.schema_value("pay-value", 1, 11, PAY_V1, schema_type="PROTOBUF")),
        (rr.schema_key("pay-value", 2),
         rr.schema_value("pay-value", 2, 12, PAY_V2, schema_type="PROTOBUF")),
        (rr.schema_key("ev-value", 1), rr.schema_value("ev-value", 1, 21, EV_V1,
                                                       schema_type="JSON")),
        (rr.schema_key("ev-value", 2), rr.schema_value("ev-value", 2, 22, EV_V2,
                                                       schema_type="JSON")),
        (rr.schema_key("ev-key", 1), rr.schema_value("ev-key", 1, 23, EV_KEY,
                                                     schema_type="JSON")),
        # an AVRO subject (its latest) with a PROTOBUF writer (compatibility NONE lets a
        # registry take it)
        (rr.schema_key("mixed-value", 1),
         rr.schema_value("mixed-value", 1, 31, MIXED_PROTO, schema_type="PROTOBUF")),
        (rr.schema_key("mixed-value", 2), rr.schema_value("mixed-value", 2, 32, MIXED_AVRO)),
    ]


class Protos:
    """The classes protoc generates for PAY_V1 and PAY_V2."""

    def __init__(self, tmp_dir):
        # one process-wide descriptor pool holds both: v1's package is renamed for the
        # oracle only (the wire format carries field numbers, never the package)
        self.v1 = compile_module(tmp_dir, PAY_V1.replace("package kl.pay;",
                                                         "package kl.pay_v1;"))
        self.v2 = compile_module(tmp_dir, PAY_V2)

    def pay_values(self) -> list[bytes | None]:
        """Topic ``pay``: v1 payments, a tombstone, v2 payments (defaults, tags, meta)."""
        out: list[bytes | None] = []
        for i in range(3):
            out.append(frame(11, self.v1.Payment(id=f"p{i}", amount=1.5 * i)
                             .SerializeToString(), FIRST))
        out.append(None)
        for i in range(3, 7):
            m = self.v2.Payment(id=f"p{i}", amount=-2.25 * i, tags=["a", "ü"][: i % 3])
            if i % 2:
                m.meta.source = f"s{i}"
            out.append(frame(12, m.SerializeToString(), SECOND))
        return out

    def expected(self, payload: bytes | None):
        """What from_protobuf gives for ``payload`` read as v2's Payment: the bytes after
        the header and indexes parsed by the protobuf package with v2's class (the reader
        resolves every writer by field number, as protobuf's parser does)."""
        if payload is None:
            return None
        body = payload[6:] if payload[5:6] == FIRST else payload[7:]
        return spark_value(parse(self.v2.Payment, body))

    def plain(self) -> list[bytes]:
        """Topic ``pay_plain``: bare v2 Payment messages (no framing)."""
        return [self.v2.Payment(id=f"q{i}", amount=float(i), tags=["t"] * i)
                .SerializeToString() for i in range(3)]

    def bad_values(self) -> list[bytes]:
        """Topic ``pay_bad``: good, no magic byte, unknown id, truncated, good."""
        good = frame(12, self.v2.Payment(id="good", amount=1.0).SerializeToString(), SECOND)
        return [good, b"\x07not protobuf", frame(99, b"\x0a\x01x", FIRST), good[:-4],
                frame(11, self.v1.Payment(id="v1").SerializeToString(), FIRST)]


def ev_json(i: int) -> dict:
    if i < 3:
        return {"kind": f"k{i}", "n": i}
    return {"kind": None if i == 4 else f"k{i}", "n": 2**40 + i,
            "at": f"2024-05-0{i}T10:00:0{i}.25Z", "tags": ["x"] * (i - 3)}


def ev_values() -> list[bytes]:
    return [b"\x00" + (21 if i < 3 else 22).to_bytes(4, "big") + json.dumps(d).encode()
            for i, d in enumerate(ev_json(i) for i in range(7))]


def ev_keys() -> list[bytes | None]:
    return [None if i == 2 else b"\x00" + (23).to_bytes(4, "big") +
            json.dumps({"user": f"u{i}"}).encode() for i in range(7)]


def ev_expected(payload: bytes | None):
    """What a reader of EV_V2 gives: json.loads of the text after the 5-byte header, each
    property of the schema (absent: null), date-time as an aware datetime."""
    if payload is None:
        return None
    doc = json.loads(payload[5:])
    at = doc.get("at")
    return {"kind": doc.get("kind"), "n": doc.get("n"),
            "at": None if at is None else dt.datetime.fromisoformat(at.replace("Z", "+00:00")),
            "tags": doc.get("tags")}


def ev_bad() -> list[bytes]:
    """Topic ``ev_bad``: good, not JSON, a property of the wrong type, unknown id, good."""
    head = b"\x00" + (22).to_bytes(4, "big")
    return [head + b'{"kind": "a", "n": 1}', head + b'{"kind": ', head + b'{"n": "seven"}',
            b"\x00" + (98).to_bytes(4, "big") + b"{}", head + b'{"kind": "z"}']


def build(root, protos: Protos):
    """The log dir: ``_schemas``; ``pay`` (v1 and v2 Payments, a tombstone), ``pay_bad``,
    ``pay_plain`` (unframed), ``pay_unreg`` (framed with id 77, which no subject holds);
    ``ev`` (JSON v1 and v2 values, JSON keys), ``ev_bad``; ``mixed`` (one Avro value
    under an AVRO subject whose v1 is PROTOBUF)."""
    b = LogDirBuilder(root)
    b.partition("_schemas", 0).append([rec(k, v, ts=500) for k, v in registry_records()])
    p = b.partition("pay", 0)
    values = protos.pay_values()
    p.append([rec(None, v, ts=1000 + i) for i, v in enumerate(values[:4])])
    p.roll()
    p.append([rec(None, v, ts=2000 + i) for i, v in enumerate(values[4:])],
             compression="gzip")
    b.partition("pay_bad", 0).append([rec(None, v) for v in protos.bad_values()])
    b.partition("pay_plain", 0).append([rec(None, v) for v in protos.plain()])
    b.partition("pay_unreg", 0).append([rec(None, frame(77, v, SECOND))
                                        for v in protos.plain()])
    b.partition("ev", 0).append([rec(k, v, ts=3000 + i)
                                 for i, (k, v) in enumerate(zip(ev_keys(), ev_values()))])
    b.partition("ev_bad", 0).append([rec(None, v) for v in ev_bad()])
    b.partition("mixed", 0).append([rec(None, b"\x00" + (32).to_bytes(4, "big") + b"\x02")])
    for _, part in b.parts:
        part.high_watermark = part.log_end_offset
    b.write()
    return root

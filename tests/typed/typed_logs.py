"""Log dirs for typed-read tests: a ``_schemas`` topic keyed and valued as Confluent's
KafkaStore writes it (tests/typed/registry_records.py) and data topics whose keys and
values fastavro encodes with the registry's framing (magic 0, 4-byte big-endian id).
The rows a typed read must give are computed with fastavro's schema resolution
(``schemaless_reader(writer, reader)``), not with spark_kafkalog. Nothing here uses
spark_kafkalog."""
from __future__ import annotations

import io
import json

import fastavro

from tests.log.logbuilder import LogDirBuilder, rec
from tests.typed import registry_records as rr

V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "amount", "type": "int"}]}
# evolution: int -> long promotion, a nullable field and an array added with defaults
V2 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "amount", "type": "long"},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []}]}
# a later version registered while a stream runs: a field the reader does not have
V3 = {**V2, "fields": V2["fields"] + [{"name": "currency", "type": "string",
                                        "default": "EUR"}]}
KEY = "string"
# a subject whose versions do not resolve: string -> long is no promotion
EVENT_V1 = {"type": "record", "name": "Event", "fields": [{"name": "id", "type": "string"}]}
EVENT_V2 = {"type": "record", "name": "Event", "fields": [{"name": "id", "type": "long"}]}

IDS = {1: V1, 2: V2, 3: KEY, 4: EVENT_V1, 5: EVENT_V2, 7: V3}


def text(schema) -> str:
    return json.dumps(schema, separators=(",", ":"))


def avro(schema, datum) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), datum)
    return buf.getvalue()


def framed(sid: int, datum) -> bytes:
    return b"\x00" + sid.to_bytes(4, "big") + avro(IDS[sid], datum)


def resolve(payload: bytes | None, reader=V2):
    """What a registry client reading with ``reader`` gets: fastavro resolves the writer
    schema the id names to it."""
    if payload is None:
        return None
    sid = int.from_bytes(payload[1:5], "big")
    return fastavro.schemaless_reader(io.BytesIO(payload[5:]), fastavro.parse_schema(IDS[sid]),
                                      fastavro.parse_schema(reader))


def registry_records() -> list[tuple[bytes, bytes | None]]:
    return [
        (rr.subject_key("CONFIG"), rr.config_value("BACKWARD")),
        (rr.schema_key("orders-value", 1), rr.schema_value("orders-value", 1, 1, text(V1))),
        (rr.schema_key("orders-key", 1), rr.schema_value("orders-key", 1, 3, text(KEY))),
        (rr.schema_key("orders-value", 2),
         rr.schema_value("orders-value", 2, 2, text(V2), schema_type="AVRO")),
        (rr.schema_key("events-value", 1), rr.schema_value("events-value", 1, 4, text(EVENT_V1))),
        (rr.schema_key("events-value", 2), rr.schema_value("events-value", 2, 5, text(EVENT_V2))),
        (rr.schema_key("payments-value", 1),
         rr.schema_value("payments-value", 1, 6, rr.PAYMENT_PROTO, schema_type="PROTOBUF")),
    ]


def order_records() -> dict[int, list]:
    """partition -> [(key bytes, value bytes)] of topic ``orders``: v1 then v2 values, a
    tombstone, a null key."""
    p0 = [(framed(3, f"k{i}"), framed(1, {"id": i, "amount": 10 * i})) for i in range(3)]
    p0.append((framed(3, "k3"), None))
    p0 += [(framed(3, f"k{i}"), framed(2, {"id": i, "amount": 2**40 + i,
                                             "note": None if i % 2 else f"n{i}",
                                             "tags": ["a", "b"][: i % 3]}))
           for i in range(4, 7)]
    p1 = [(None, framed(2, {"id": 100 + i, "amount": -i, "note": "ü", "tags": []}))
          for i in range(3)]
    return {0: p0, 1: p1}


def bad_records() -> list:
    """Topic ``orders_bad`` (read with valueSubject=orders-value): good, no magic byte,
    unknown id, truncated payload, good."""
    good = framed(2, {"id": 1, "amount": 5, "note": "x", "tags": ["t"]})
    return [(None, good), (None, b"\x07not avro"),
            (None, b"\x00" + (99).to_bytes(4, "big") + avro(V2, {"id": 2, "amount": 1})),
            (None, good[:-3]), (None, framed(1, {"id": 9, "amount": 9}))]


PLAIN = [avro(V1, {"id": i, "amount": i}) for i in range(3)]


EVOLVED = [(None, framed(7, {"id": 200 + i, "amount": i, "note": None, "tags": ["z"],
                               "currency": "USD"})) for i in range(2)]


def build(root, *, registry_topic: str = "_schemas", evolved: bool = False):
    """The log dir: the registry topic, ``orders`` (2 partitions), ``orders_bad``,
    ``events`` (v1 data under an unresolvable v2) and ``plain`` (unframed v1). With
    ``evolved`` the same, then orders-value v3 (id 7) registered and two records written
    with it appended to ``orders`` partition 1 (the same log, later)."""
    b = LogDirBuilder(root)
    reg = b.partition(registry_topic, 0)
    reg.append([rec(k, v, ts=500) for k, v in registry_records()])
    if evolved:
        reg.append([rec(rr.schema_key("orders-value", 3),
                        rr.schema_value("orders-value", 3, 7, text(V3)), ts=600)])
    records = order_records()
    if evolved:
        records[1] = records[1] + EVOLVED
    for q, rows in records.items():
        p = b.partition("orders", q)
        half = len(rows) // 2
        p.append([rec(k, v, ts=1000 + i) for i, (k, v) in enumerate(rows[:half])])
        p.roll()
        p.append([rec(k, v, ts=2000 + i) for i, (k, v) in enumerate(rows[half:])],
                 compression="gzip")
    p = b.partition("orders_bad", 0)
    p.append([rec(k, v) for k, v in bad_records()])
    p = b.partition("events", 0)
    p.append([rec(None, framed(4, {"id": "e1"}))])
    p = b.partition("plain", 0)
    p.append([rec(None, v) for v in PLAIN])
    for _, part in b.parts:
        part.high_watermark = part.log_end_offset
    b.write()
    return root

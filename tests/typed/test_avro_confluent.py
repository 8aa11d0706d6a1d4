"""The schema-registry wire format as Confluent's own client writes it: confluent-kafka's
AvroSerializer with its in-process ``mock://`` registry (no network) frames the values and
assigns the ids; its AvroDeserializer (with the reader schema) is the oracle of the values."""
from __future__ import annotations

import json
import warnings

import pytest

from spark_kafkalog.typed.avro import AvroDecoder
from tests.typed.avro_oracle import binary, spark_value


@pytest.fixture()
def confluent(request):
    # authlib (imported by the registry client) warns about its own httpx integration at
    # import, through an "always" filter of its own: recorded here and dropped
    with warnings.catch_warnings(record=True):
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext
        # a registry of its own per test (mock registries are shared by URL)
        client = SchemaRegistryClient.new_client({"url": f"mock://{request.node.name}"})
    ctx = SerializationContext("orders", MessageField.VALUE)
    return client, AvroSerializer, AvroDeserializer, ctx


V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "int"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "tags", "type": {"type": "array", "items": "string"}}]}
V2 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"],
                               "default": "NEW"}, "default": "NEW"}]}


def test_serializer_frames_with_registry_ids(confluent):
    import decimal
    client, Ser, Deser, ctx = confluent
    ser1 = Ser(client, json.dumps(V1))
    ser2 = Ser(client, json.dumps(V2))
    values = []
    for i in range(30):
        if i % 3 != 1:       # V1 registered first: version 1, the older schema
            values.append(ser1({"id": i, "amount": decimal.Decimal(f"{i}.25"), "tags": ["a"] * (i % 3)}, ctx))
        else:
            values.append(ser2({"id": -i, "amount": decimal.Decimal("-1.50"), "tags": [],
                                "note": None if i % 2 else f"n{i}", "state": "PAID"}, ctx))
    values.insert(4, None)
    versions = client.get_versions("orders-value")
    ids = {client.get_version("orders-value", v).schema_id for v in versions}
    assert len(ids) == 2
    writers = {sid: client.get_schema(sid).schema_str for sid in ids}
    latest = client.get_version("orders-value", max(versions)).schema.schema_str
    dec = AvroDecoder(latest, writers)
    got = dec.decode(binary(values)).array
    got.validate(full=True)
    oracle = Deser(client, latest)
    want = [None if v is None else spark_value(json.loads(latest), oracle(v, ctx)) for v in values]
    assert got.to_pylist() == want
    assert {row["state"] for row in got.to_pylist() if row} == {"NEW", "PAID"}


def test_schema_references(confluent):
    # a registry entry that references another subject's schema by full name: the decoder
    # gets the referenced schema as a named type
    client, Ser, Deser, ctx = confluent
    from confluent_kafka.schema_registry import Schema, SchemaReference
    money = {"type": "record", "name": "Money", "namespace": "fin",
             "fields": [{"name": "cents", "type": "long"}, {"name": "cur", "type": "string"}]}
    client.register_schema("fin.Money", Schema(json.dumps(money), "AVRO"))
    pay = {"type": "record", "name": "Pay", "namespace": "fin", "fields": [
        {"name": "amount", "type": "fin.Money"}, {"name": "fee", "type": ["null", "Money"]}]}
    ser = Ser(client, Schema(json.dumps(pay), "AVRO", [SchemaReference("fin.Money", "fin.Money", 1)]))
    rows = [{"amount": {"cents": 5, "cur": "EUR"}, "fee": None},
            {"amount": {"cents": -7, "cur": ""}, "fee": {"cents": 1, "cur": "X"}}]
    values = [ser(r, ctx) for r in rows]
    sid = int.from_bytes(values[0][1:5], "big")
    registered = client.get_schema(sid)
    named = {ref.name: client.get_version(ref.subject, ref.version).schema.schema_str
             for ref in registered.references}
    dec = AvroDecoder(registered.schema_str, {sid: registered.schema_str}, named_types=named)
    assert dec.decode(binary(values)).array.to_pylist() == rows

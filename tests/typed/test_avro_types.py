"""Every Avro type and logical type, encoded by fastavro, decoded by AvroDecoder and compared
value for value with fastavro's own reading (in Spark's types: tests/typed/avro_oracle.py)."""
from __future__ import annotations

import datetime
import decimal
import uuid

import pyarrow as pa
import pytest

from spark_kafkalog.errors import SchemaError
from spark_kafkalog.typed.avro import AvroDecoder, avro_arrow_type, parse_schema
from tests.typed.avro_oracle import binary, dumps, encode, oracle_read, spark_value

UTC = datetime.timezone.utc


def _fixed(name, size, **kw):
    return {"type": "fixed", "name": name, "size": size, **kw}


# (schema, values, Arrow type Spark gives it)
CASES = [
    ("null", [None, None], pa.null()),
    ("boolean", [True, False], pa.bool_()),
    ("int", [0, 1, -1, 2**31 - 1, -(2**31)], pa.int32()),
    ("long", [0, -1, 2**63 - 1, -(2**63), 300], pa.int64()),
    ("float", [0.0, 1.5, -3.25e10, float("inf")], pa.float32()),
    ("double", [0.0, 1e-300, -2.5, float("-inf")], pa.float64()),
    ("bytes", [b"", b"\x00\xff", bytes(range(256))], pa.binary()),
    ("string", ["", "a", "héllo wörld ✓ 𝄞", "x" * 1000], pa.string()),
    ({"type": "enum", "name": "Suit", "symbols": ["SPADES", "HEARTS", "CLUBS"]},
     ["HEARTS", "SPADES", "CLUBS"], pa.string()),
    (_fixed("F4", 4), [b"abcd", b"\x00\x00\x00\x00"], pa.binary()),
    (_fixed("F0", 0), [b"", b""], pa.binary()),
    ({"type": "int", "logicalType": "date"},
     [datetime.date(1970, 1, 1), datetime.date(2024, 2, 29), datetime.date(1, 1, 1)], pa.date32()),
    ({"type": "int", "logicalType": "time-millis"},
     [datetime.time(0, 0), datetime.time(23, 59, 59, 999000)], pa.int32()),
    ({"type": "long", "logicalType": "time-micros"},
     [datetime.time(12, 30, 1, 5), datetime.time(0, 0)], pa.int64()),
    ({"type": "long", "logicalType": "timestamp-millis"},
     [datetime.datetime(2021, 5, 1, 12, 0, 0, 123000, tzinfo=UTC),
      datetime.datetime(1900, 1, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC")),
    ({"type": "long", "logicalType": "timestamp-micros"},
     [datetime.datetime(2021, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)], pa.timestamp("us", tz="UTC")),
    ({"type": "long", "logicalType": "timestamp-nanos"}, [123456789012345678, -5], pa.int64()),
    ({"type": "long", "logicalType": "local-timestamp-millis"},
     [datetime.datetime(2021, 5, 1, 12, 0, 0, 123000)], pa.timestamp("us")),
    ({"type": "long", "logicalType": "local-timestamp-micros"},
     [datetime.datetime(2021, 5, 1, 12, 0, 0, 123456)], pa.timestamp("us")),
    ({"type": "long", "logicalType": "local-timestamp-nanos"}, [7, -7], pa.int64()),
    ({"type": "string", "logicalType": "uuid"},
     [uuid.UUID("0e9a1c5e-1a3b-4c6d-8e9f-0a1b2c3d4e5f")], pa.string()),
    (_fixed("U", 16, logicalType="uuid"), [uuid.UUID(int=12345).bytes], pa.binary()),
    (_fixed("Dur", 12, logicalType="duration"), [b"\x01" * 12], pa.binary()),
    ({"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 3},
     [decimal.Decimal("123456.789"), decimal.Decimal("-0.001"), decimal.Decimal("0.000")],
     pa.decimal128(9, 3)),
    ({"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 0},
     [decimal.Decimal("9" * 38), decimal.Decimal("-" + "9" * 38)], pa.decimal128(38, 0)),
    (_fixed("Dec", 8, logicalType="decimal", precision=18, scale=4),
     [decimal.Decimal("12345678901234.5678"), decimal.Decimal("-1.0000")], pa.decimal128(18, 4)),
    ({"type": "array", "items": "long"}, [[], [1, 2, 3], [-(2**40)]],
     pa.list_(pa.field("element", pa.int64(), nullable=False))),
    ({"type": "array", "items": ["null", "string"]}, [[None, "a"], []],
     pa.list_(pa.field("element", pa.string()))),
    ({"type": "map", "values": "int"}, [{}, {"a": 1, "b": -2}],
     pa.map_(pa.field("key", pa.string(), nullable=False), pa.field("value", pa.int32(), nullable=False))),
    ({"type": "map", "values": {"type": "array", "items": "null"}}, [{"k": [None, None]}],
     pa.map_(pa.field("key", pa.string(), nullable=False),
             pa.field("value", pa.list_(pa.field("element", pa.null())), nullable=False))),
    (["null", "int"], [None, 5, None], pa.int32()),
    (["string", "null"], ["x", None], pa.string()),
    (["int", "long"], [1, 2**40], pa.int64()),
    (["null", "float", "double"], [None, 1.5], pa.float64()),
    (["int"], [4], pa.int32()),
    (["null"], [None], pa.null()),
    (["int", "string", "null"], [1, "a", None],
     pa.struct([pa.field("member0", pa.int32()), pa.field("member1", pa.string())])),
]


@pytest.mark.parametrize("schema,values,arrow", CASES, ids=lambda c: None)
def test_type_against_fastavro(schema, values, arrow):
    payloads = encode(schema, values)
    dec = AvroDecoder(dumps(schema))
    assert dec.arrow_type == arrow == avro_arrow_type(dumps(schema))
    got = dec.decode(binary(payloads), framing="none").array
    got.validate(full=True)
    assert got.type == arrow
    want = [spark_value(schema, oracle_read(schema, p)) for p in payloads]
    assert got.to_pylist() == want


NESTED = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
            {"name": "name", "type": "string"},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "address", "type": ["null", {"type": "record", "name": "Address", "fields": [
                {"name": "city", "type": "string"},
                {"name": "zip", "type": ["null", "int"]}]}]}]}},
        {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
            {"name": "sku", "type": {"type": "enum", "name": "Sku", "symbols": ["A", "B"]}},
            {"name": "qty", "type": "int"},
            {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
            {"name": "attrs", "type": {"type": "map", "values": ["null", "string"]}}]}}},
        {"name": "billing", "type": ["null", "Address"]},     # a named type used again
        {"name": "payload", "type": ["null", "Address", "string", {"type": "array", "items": "int"}]},
        {"name": "digest", "type": {"type": "fixed", "name": "Md5", "size": 4}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    ],
}


def _order(i):
    addr = None if i % 3 == 0 else {"city": f"c{i}", "zip": None if i % 2 else i}
    return {
        "id": i, "customer": {"name": f"n{i}", "tags": [str(t) for t in range(i % 4)], "address": addr},
        "lines": [{"sku": "AB"[j % 2], "qty": j, "price": decimal.Decimal(f"{j}.{i % 100:02d}"),
                   "attrs": {f"k{k}": (None if k % 2 else "v") for k in range(j)}} for j in range(i % 3)],
        "billing": addr,
        "payload": [None, addr or {"city": "z", "zip": 1}, "text", [1, 2]][i % 4],
        "digest": bytes([i % 256]) * 4,
        "at": datetime.datetime(2020, 1, 1, tzinfo=UTC) + datetime.timedelta(seconds=i),
    }


def test_nested_record_framed_and_nulls():
    records = [_order(i) for i in range(40)]
    payloads = encode(NESTED, records, schema_id=42)
    dec = AvroDecoder(dumps(NESTED), {42: dumps(NESTED)})
    values = binary(payloads[:20] + [None] + payloads[20:])
    got = dec.decode(values).array
    got.validate(full=True)
    want = [spark_value(NESTED, oracle_read(NESTED, p[5:])) for p in payloads]
    assert got.to_pylist() == want[:20] + [None] + want[20:]
    # a slice of a larger array (non-zero offset) and large_binary decode the same
    sliced = dec.decode(values.slice(3, 10)).array
    assert sliced.to_pylist() == (want[:20] + [None] + want[20:])[3:13]
    large = dec.decode(values.cast(pa.large_binary())).array
    assert large.equals(got)


def test_empty_input_and_empty_record():
    dec = AvroDecoder(dumps(NESTED), {1: dumps(NESTED)})
    out = dec.decode(binary([])).array
    assert len(out) == 0 and out.type == dec.arrow_type
    empty = {"type": "record", "name": "E", "fields": []}
    got = AvroDecoder(dumps(empty)).decode(binary(encode(empty, [{}, {}])), framing="none").array
    assert got.to_pylist() == [{}, {}]


def test_arrow_types_are_sparks():
    t = AvroDecoder(dumps(NESTED)).arrow_type
    assert t.field("customer").type.field("address").nullable
    assert not t.field("customer").type.field("name").nullable
    assert t.field("payload").type == pa.struct([
        pa.field("member0", t.field("billing").type), pa.field("member1", pa.string()),
        pa.field("member2", pa.list_(pa.field("element", pa.int32(), nullable=False)))])
    assert t.field("lines").type.value_field.name == "element"


def test_recursive_schema_refused_with_its_name():
    node = {"type": "record", "name": "Node", "namespace": "t", "fields": [
        {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(SchemaError, match=r"recursive.*t\.Node"):
        AvroDecoder(dumps(node))


def test_decimal_over_38_digits_refused():
    with pytest.raises(SchemaError, match="38"):
        avro_arrow_type(dumps({"type": "bytes", "logicalType": "decimal", "precision": 40}))


def test_named_types_from_references():
    ref = {"type": "record", "name": "Money", "namespace": "fin", "fields": [
        {"name": "cents", "type": "long"}, {"name": "cur", "type": "string"}]}
    top = {"type": "record", "name": "Pay", "namespace": "fin",
           "fields": [{"name": "amount", "type": "Money"}, {"name": "fee", "type": "fin.Money"}]}
    full = {"type": "record", "name": "Pay", "namespace": "fin",
            "fields": [{"name": "amount", "type": ref}, {"name": "fee", "type": "fin.Money"}]}
    rec = {"amount": {"cents": 5, "cur": "EUR"}, "fee": {"cents": -1, "cur": "X"}}
    dec = AvroDecoder(dumps(top), {3: dumps(top)}, named_types={"fin.Money": dumps(ref)})
    assert dec.decode(binary(encode(full, [rec], schema_id=3))).array.to_pylist() == [rec]
    with pytest.raises(SchemaError, match="unknown type"):
        parse_schema(dumps(top))


def test_decimal_too_wide_for_its_fixed_is_binary():
    # Java's Avro ignores an invalid logical type (fastavro refuses the schema): Spark then
    # sees the plain fixed, binary. A fixed's encoding is its bytes (the specification).
    small = {"type": "fixed", "name": "Small", "size": 2, "logicalType": "decimal",
             "precision": 10, "scale": 0}
    dec = AvroDecoder(dumps(small))
    assert dec.arrow_type == pa.binary()
    assert dec.decode(binary([b"\x01\x02"]), framing="none").array.to_pylist() == [b"\x01\x02"]


def test_decoder_pickles_as_its_schemas():
    import pickle
    dec = AvroDecoder(dumps(NESTED), {42: dumps(NESTED)})
    values = binary(encode(NESTED, [_order(1), _order(2)], schema_id=42))
    again = pickle.loads(pickle.dumps(dec))
    assert again.arrow_type == dec.arrow_type
    assert again.decode(values).array.equals(dec.decode(values).array)


def test_reused_buffers_hold_no_stale_values():
    from spark_kafkalog.typed import _avro
    schema = {"type": "record", "name": "Big", "fields": [
        {"name": "a", "type": "long"}, {"name": "s", "type": ["null", "string"]},
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 0}}]}
    dec = AvroDecoder(dumps(schema))
    first = binary(encode(schema, [{"a": -1, "s": "x" * 9, "d": decimal.Decimal(99999)}]) * 150_000)
    second_rows = [{"a": i, "s": None if i % 3 else str(i), "d": decimal.Decimal(i % 7)}
                   for i in range(140_000)]
    second = binary(encode(schema, second_rows))
    try:
        del_me = dec.decode(first, framing="none").array      # >= 1 MiB buffers, then released
        assert len(del_me) == 150_000
        del del_me
        reused = dec.decode(second, framing="none").array
        _avro.set_buffer_cache_limit(0)
        fresh = dec.decode(second, framing="none").array
    finally:
        _avro.set_buffer_cache_limit(128 << 20)
    reused.validate(full=True)
    assert reused.equals(fresh)
    assert reused.slice(0, 4).to_pylist() == [
        {"a": i, "s": None if i % 3 else str(i), "d": decimal.Decimal(i % 7)} for i in range(4)]

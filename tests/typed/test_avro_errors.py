"""Bad records under each ``on_error`` mode, and hostile input: truncation at every byte,
random bytes, huge declared lengths and counts. Good rows come from fastavro; bad rows are
built by hand from the specification's encoding (so the bytes are known to be wrong)."""
from __future__ import annotations

import random
import struct

import pyarrow as pa
import pytest

from spark_kafkalog.errors import CorruptRecordError, TypedRecordError
from spark_kafkalog.typed.avro import AvroDecoder
from tests.typed.avro_oracle import binary, dumps, encode, oracle_read, spark_value
from tests.typed.test_avro_types import NESTED, _order

SCHEMA = {"type": "record", "name": "Bad", "fields": [
    {"name": "s", "type": "string"},
    {"name": "u", "type": ["null", "int"]},
    {"name": "e", "type": {"type": "enum", "name": "En", "symbols": ["A", "B"]}},
    {"name": "b", "type": "boolean"},
    {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 1}},
    {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "i", "type": "int"},
]}
GOOD = {"s": "ok", "u": 1, "e": "B", "b": True, "d": b"\x01", "t": 5, "i": 3}


def zz(n):
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def body(s=b"\x04ok", u=b"\x02\x02", e=b"\x02", b=b"\x01", d=b"\x02\x01", t=b"\x0a", i=b"\x06"):
    return s + u + e + b + d + t + i


def framed(payload, sid=9):
    return b"\x00" + struct.pack(">I", sid) + payload


# name: (value, message fragment, byte position in the value)
BAD = {
    "no magic byte": (b"", "no magic byte", 0),
    "magic not 0": (b"\x01" + body(), "magic byte 1", 0),
    "short header": (b"\x00\x00\x00", "shorter than the 5-byte", 0),
    "unknown schema id": (framed(body(), sid=1234), "unknown schema id 1234", 1),
    "truncated": (framed(body()[:-1]), "truncated", 5 + len(body()) - 1),
    "trailing bytes": (framed(body() + b"\x00\x00"), "2 trailing bytes", 5 + len(body())),
    "union branch out of range": (framed(body(u=b"\x04")), "union branch 2", 5 + 3),
    "negative union branch": (framed(body(u=b"\x01")), "union branch -1", 5 + 3),
    "enum index out of range": (framed(body(e=b"\x04")), "enum index 2", 5 + 5),
    "negative length": (framed(body(s=b"\x03ok")), "negative length -2", 5),
    "invalid UTF-8": (framed(body(s=b"\x04\xc3\x28")), "not valid UTF-8", 5),
    "varint too long": (framed(body(t=b"\xff" * 10 + b"\x01")), "varint too long", 5 + 9),
    "int varint too long": (framed(body(i=b"\x80\x80\x80\x80\x80\x01")), "varint too long", 5 + 10),
    "boolean not 0/1": (framed(body(b=b"\x02")), "boolean byte 2", 5 + 6),
    "decimal over precision": (framed(body(d=b"\x04\x27\x10")), "precision", 5 + 7),
    "timestamp overflow": (framed(body(t=zz(2**62))), "overflows", 5 + 9),
}


def _decoder():
    return AvroDecoder(dumps(SCHEMA), {9: dumps(SCHEMA)})


def test_good_body_is_what_fastavro_writes():
    assert framed(body()) == encode(SCHEMA, [GOOD], schema_id=9)[0]


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_record_fail(name):
    value, fragment, pos = BAD[name]
    good = encode(SCHEMA, [GOOD], schema_id=9)[0]
    with pytest.raises(TypedRecordError, match=fragment) as info:
        _decoder().decode(binary([good, good, value]))
    err = info.value
    assert isinstance(err, CorruptRecordError)
    assert err.row == 2 and err.value_position == pos
    assert err.schema_id == (None if name in ("no magic byte", "magic not 0", "short header") else
                             1234 if name == "unknown schema id" else 9)
    assert "row 2" in str(err) and f"byte {pos}" in str(err)


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_record_null_and_skip(name):
    value, fragment, _ = BAD[name]
    good = encode(SCHEMA, [GOOD, dict(GOOD, s="second", u=None)], schema_id=9)
    want = [spark_value(SCHEMA, oracle_read(SCHEMA, g[5:])) for g in good]
    rows = binary([good[0], value, None, good[1]])
    res = _decoder().decode(rows, on_error="null")
    res.array.validate(full=True)
    assert res.array.to_pylist() == [want[0], None, None, want[1]]
    errors = res.errors.to_pylist()
    assert errors[0] is None and errors[2] is None and errors[3] is None
    assert fragment in errors[1]
    res = _decoder().decode(rows, on_error="skip")
    res.array.validate(full=True)
    assert res.array.to_pylist() == [want[0], None, want[1]]
    assert res.kept.to_pylist() == [True, False, True, True]
    assert fragment in res.errors.to_pylist()[1]


def test_an_id_past_javas_int_is_kept_as_read():
    """A frame whose four id bytes read past 2**31 - 1 (no registry id is: Java's int) is
    an unknown id; under null/skip its id is what the frame says, in an int64 column
    (the guided fuzzer found it overflowing the int32 column the dead letter had)."""
    good = encode(SCHEMA, [GOOD], schema_id=9)[0]
    value = b"\x00\xff\x07\x04\x0a" + good[5:]
    for mode in ("null", "skip"):
        res = _decoder().decode(binary([good, value]), on_error=mode)
        assert res.schema_ids.type == pa.int64()
        assert res.schema_ids.to_pylist() == [None, 0xFF07040A]
        assert "unknown schema id 4278649866" in res.errors.to_pylist()[1]


def test_truncated_at_every_byte():
    records = [_order(i) for i in (5, 7, 10)]
    dec = AvroDecoder(dumps(NESTED), {1: dumps(NESTED)})
    for payload in encode(NESTED, records, schema_id=1):
        cuts = [payload[:k] for k in range(len(payload))]
        res = dec.decode(binary(cuts + [payload]), on_error="null")
        res.array.validate(full=True)
        assert res.array.null_count == len(cuts)
        assert all(e is not None for e in res.errors.to_pylist()[:-1])
        assert res.array[len(cuts)].as_py() is not None
        with pytest.raises(TypedRecordError):
            dec.decode(binary(cuts[len(cuts) // 2:len(cuts) // 2 + 1]))


def test_random_bytes_never_crash_and_agree_with_fastavro():
    rnd = random.Random(38)
    dec = AvroDecoder(dumps(NESTED), {1: dumps(NESTED)})
    good = encode(NESTED, [_order(i) for i in range(30)])
    payloads = []
    for _ in range(3000):
        base = bytearray(rnd.choice(good))
        for _ in range(rnd.randint(1, 4)):          # flip bytes of a valid value
            base[rnd.randrange(len(base))] = rnd.randrange(256)
        payloads.append(bytes(base))
        payloads.append(bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 60))))
    res = dec.decode(binary([b"\0\0\0\0\1" + p for p in payloads]), on_error="null")
    res.array.validate(full=True)
    got = res.array.to_pylist()
    agreed = 0
    for p, value in zip(payloads, got):
        if value is None:
            continue
        # whatever we accept, fastavro reads to the same value using every byte
        assert value == spark_value(NESTED, oracle_read(NESTED, p))
        agreed += 1
    assert agreed > 0


HUGE = {
    "string length 2^62": ("string", zz(2**62) + b"abc"),
    "bytes length 2^40": ("bytes", zz(2**40)),
    "array count 2^62": ({"type": "array", "items": "long"}, zz(2**62) + b"\x02"),
    "array block size past the value": ({"type": "array", "items": "long"},
                                        zz(-3) + zz(2**50) + b"\x02\x02\x02\x00"),
    "map count 2^40": ({"type": "map", "values": "int"}, zz(2**40) + b"\x02a\x02"),
    "array of nulls, count 2^40": ({"type": "array", "items": "null"}, zz(2**40) + b"\x00"),
    "array of empty records": ({"type": "array", "items": {"type": "record", "name": "Z", "fields": []}},
                               zz(2**30) + b"\x00"),
    "nested arrays": ({"type": "array", "items": {"type": "array", "items": "int"}},
                      zz(1) + zz(2**60)),
    "fixed past the value": ({"type": "fixed", "name": "Big", "size": 1000}, b"x" * 999),
    "count INT64_MIN": ({"type": "array", "items": "int"}, b"\xff" * 9 + b"\x01"),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", sorted(HUGE))
def test_huge_declared_lengths(name):
    schema, payload = HUGE[name]
    dec = AvroDecoder(dumps(schema))
    with pytest.raises(TypedRecordError):
        dec.decode(binary([payload]), framing="none")
    res = dec.decode(binary([payload, payload]), framing="none", on_error="skip")
    assert len(res.array) == 0 and res.kept.to_pylist() == [False, False]


def test_options_checked():
    from spark_kafkalog.errors import InvalidOptionError
    dec = _decoder()
    with pytest.raises(InvalidOptionError, match="framing"):
        dec.decode(binary([]), framing="magic")
    with pytest.raises(InvalidOptionError, match="on_error"):
        dec.decode(binary([]), on_error="ignore")
    with pytest.raises(InvalidOptionError, match="binary"):
        dec.decode(pa.array(["x"]))


def test_typed_record_error_pickles_and_unwraps():
    import pickle

    from spark_kafkalog.errors import unwrap
    value, _, pos = BAD["enum index out of range"]
    with pytest.raises(TypedRecordError) as info:
        _decoder().decode(binary([value]))
    again = pickle.loads(pickle.dumps(info.value))
    assert (again.row, again.schema_id, again.value_position) == (0, 9, pos)
    assert str(again) == str(info.value)
    # as Spark hands it back: text only; the class and message survive
    found = unwrap(RuntimeError(f"PythonException: spark_kafkalog.errors.TypedRecordError: {info.value}"))
    assert isinstance(found, TypedRecordError) and "enum index 2" in str(found)

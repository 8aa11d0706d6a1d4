"""ProtobufEncoder against outside oracles: the rows Spark's from_protobuf gives for messages
protoc's classes build (proto_oracle.spark_value) are encoded by us and parsed back by the
``protobuf`` package; scalar messages are byte for byte what ``SerializeToString`` and
confluent-kafka's ProtobufSerializer write, and its ProtobufDeserializer reads our framing.
No Spark."""
from __future__ import annotations

import random
import warnings

import pyarrow as pa
import pytest
from hypothesis import given

from spark_kafkalog.errors import BadRowError, SchemaError
from spark_kafkalog.typed.proto_write import ProtobufEncoder, message_indexes
from spark_kafkalog.typed.protobuf import ProtobufDecoder
from tests.typed.proto_oracle import _ints, compile_module, parse, spark_value
from tests.typed.test_protobuf import PROTO2, RICH, SCALARS, _rand_scalars, _rich
from tests.typed.proto_random import SEEDS, SPECS, random_messages, random_settings


@pytest.fixture(scope="module")
def mods(tmp_path_factory):
    d = tmp_path_factory.mktemp("protow")
    return {name: compile_module(d, text) for name, text in
            (("scalars", SCALARS), ("rich", RICH), ("p2", PROTO2))}


def _arrow(rows, t):
    """Rows as spark_value gives them (times as int64 microseconds) in Arrow type ``t``."""
    return pa.array(rows, _ints(t)).cast(t)


def _round_trip(text, klass, msgs, message=None, sid=None):
    t = ProtobufDecoder(text, message=message).arrow_type
    rows = [spark_value(m) for m in msgs]
    enc = ProtobufEncoder(text, t, sid, message=message)
    out = enc.encode(_arrow(rows, t))
    out.validate(full=True)
    skip = len(enc.prefix)
    got = [spark_value(parse(klass, v[skip:])) for v in out.to_pylist()]
    assert got == rows
    return out, rows


def test_every_scalar_type_byte_for_byte(mods):
    mod = mods["scalars"]
    rng = random.Random(6)
    msgs = [_rand_scalars(mod, rng) for _ in range(300)] + [mod.Scalars()]
    out, _ = _round_trip(SCALARS, mod.Scalars, msgs)
    # proto3 implicit presence: defaults are not written, so the bytes are protobuf's own
    assert out.to_pylist() == [m.SerializeToString() for m in msgs]


def test_nested_repeated_map_oneof_enum_wkt(mods):
    mod = mods["rich"]
    rng = random.Random(38)
    msgs = [_rich(mod, rng, i) for i in range(200)] + [mod.Order()]
    _round_trip(RICH, mod.Order, msgs)
    # a nested message as the column's type: its indexes ([0, 0]) frame it
    lines = [mod.Order.Line(sku="a", qty=-3, tags=["x", "y"]), mod.Order.Line()]
    out, _ = _round_trip(RICH, mod.Order.Line, lines, message="kl.rich.Order.Line", sid=9)
    assert out[0].as_py()[:8] == b"\x00\x00\x00\x00\x09\x04\x00\x00"


def test_proto2_presence_defaults_and_packing(mods):
    mod = mods["p2"]
    msgs = [mod.P2(id=1), mod.P2(id=-2, n=0, s="", kind=1, kind2=2, d=-0.0,
                                unpacked=[1, 2], packed=[3, -4], f=2.5, zs={1: 1, 2: 0})]
    out, rows = _round_trip(PROTO2, mod.P2, msgs)
    # an optional with a default is written (explicit presence), as Spark reads it back
    assert parse(mod.P2, out[0].as_py()).HasField("n")
    # [packed = true] packs, a plain proto2 repeated does not (what protobuf writes)
    second = parse(mod.P2, out[1].as_py())
    assert b"\x38\x01\x38\x02" in out[1].as_py()          # field 7, one tag per element
    assert b"\x42\x0b\x03" in out[1].as_py()             # field 8 packed: 11 bytes of varints
    assert list(second.packed) == [3, -4]


def test_confluent_serializer_and_deserializer(mods):
    with warnings.catch_warnings(record=True):
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.protobuf import (ProtobufDeserializer,
                                                              ProtobufSerializer)
        from confluent_kafka.serialization import MessageField, SerializationContext
        client = SchemaRegistryClient.new_client({"url": "mock://proto-write-tests"})
    scal, rich = mods["scalars"], mods["rich"]
    ctx = SerializationContext("s", MessageField.VALUE)
    ser = ProtobufSerializer(scal.Scalars, client, {"use.deprecated.format": False})
    rng = random.Random(2)
    msgs = [_rand_scalars(scal, rng) for _ in range(40)]
    theirs = [ser(m, ctx) for m in msgs]
    sid = client.get_latest_version("s-value").schema_id
    t = ProtobufDecoder(SCALARS).arrow_type
    ours = ProtobufEncoder(SCALARS, t, sid).encode(_arrow([spark_value(m) for m in msgs], t))
    assert ours.to_pylist() == theirs
    # their deserializer reads our framing of a nested message (indexes [0, 0])
    lctx = SerializationContext("l", MessageField.VALUE)
    ProtobufSerializer(rich.Order.Line, client, {"use.deprecated.format": False})(
        rich.Order.Line(sku="z"), lctx)
    lsid = client.get_latest_version("l-value").schema_id
    lines = [rich.Order.Line(sku="a", qty=2, tags=["t"]), rich.Order.Line(qty=-1)]
    lt = ProtobufDecoder(RICH, message="kl.rich.Order.Line").arrow_type
    out = ProtobufEncoder(RICH, lt, lsid, message="kl.rich.Order.Line").encode(
        _arrow([spark_value(m) for m in lines], lt))
    de = ProtobufDeserializer(rich.Order.Line, {"use.deprecated.format": False}, client)
    assert [de(v, lctx) for v in out.to_pylist()] == lines


def test_message_indexes_as_confluent_writes_them():
    assert message_indexes([0]) == b"\x00"
    assert message_indexes([1]) == b"\x02\x02"
    assert message_indexes([0, 2]) == b"\x04\x00\x04"


def test_wkt_from_arrow_times_and_bare_wrappers(mods):
    mod = mods["rich"]
    t = pa.struct([("at", pa.timestamp("ns", tz="UTC")), ("took", pa.duration("ms")),
                   ("maybe", pa.int32()), ("label", pa.string())])
    rows = [{"at": -1, "took": -1500, "maybe": 0, "label": "x"},
            {"at": 1_700_000_000_123_456_789, "took": 2001, "maybe": None, "label": None}]
    out = ProtobufEncoder(RICH, t).encode(pa.array(rows, t))
    a, b = (parse(mod.Order, v) for v in out.to_pylist())
    assert (a.at.seconds, a.at.nanos) == (-1, 999_999_999)         # floor: nanos >= 0
    assert (a.took.seconds, a.took.nanos) == (-1, -500_000_000)    # the seconds' sign
    assert a.HasField("maybe") and a.maybe.value == 0 and a.label.value == "x"
    assert (b.at.seconds, b.at.nanos) == (1_700_000_000, 123_456_789)
    assert (b.took.seconds, b.took.nanos) == (2, 1_000_000)
    assert not b.HasField("maybe") and not b.HasField("label")


def test_sliced_input_and_null_rows():
    t = ProtobufDecoder(SCALARS).arrow_type
    arr = _arrow([{"f_int32": i, "f_string": f"s{i}"} for i in range(10)] + [None], t)
    enc = ProtobufEncoder(SCALARS, t, 1)
    whole = enc.encode(arr).to_pylist()
    assert enc.encode(arr.slice(3, 8)).to_pylist() == whole[3:]
    assert whole[-1] is None


@pytest.mark.parametrize("text, t, words", [
    (PROTO2, pa.struct([("n", pa.int32())]), "value: Protobuf message kl.p2.P2 requires "
                                             "field 'id'"),
    (SCALARS, pa.struct([("f_int32", pa.string())]), "value.f_int32: Arrow type string "
                                                     "cannot be written as Protobuf int32"),
    (SCALARS, pa.struct([("nope", pa.int32())]), "value: field 'nope' of the struct is not "
                                                 "in Protobuf message kl.test.Scalars"),
    (RICH, pa.struct([("first", pa.int32())]), "value.first: Arrow type int32 cannot be "
                                               "written as Protobuf message"),
    (RICH, pa.struct([("counts", pa.list_(pa.int64()))]), "value.counts: Arrow type "
                                                          "list<item: int64> cannot be "
                                                          "written as Protobuf map"),
])
def test_struct_that_does_not_fit_refused_up_front(text, t, words):
    with pytest.raises(SchemaError) as e:
        ProtobufEncoder(text, t, 1)
    assert words in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("text, t, row, words", [
    (PROTO2, pa.struct([("id", pa.int32())]), {"id": None},
     "row 8: value.id is null, but the field is required"),
    (SCALARS, pa.struct([("f_int32", pa.int64())]), {"f_int32": 1 << 40},
     "row 8: value.f_int32 value 1099511627776 does not fit int32"),
    (RICH, pa.struct([("state", pa.string())]), {"state": "LOST"},
     "row 8: value.state symbol 'LOST' is not in enum kl.rich.Order.State"),
    (RICH, pa.struct([("card", pa.string()), ("account", pa.int64())]),
     {"card": "c", "account": 1}, "row 8: value.account sets a second member of oneof "
                                  "payment"),
    (RICH, pa.struct([("packed_ints", pa.list_(pa.int32()))]), {"packed_ints": [1, None]},
     "row 8: value.packed_ints holds a null element"),
    (RICH, pa.struct([("states", pa.list_(pa.string()))]), {"states": ["NEW", "LOST"]},
     "row 8: value.states\\[\\] symbol 'LOST' is not in enum"),
    (RICH, pa.struct([("by_pos", pa.map_(pa.int64(), pa.struct([("qty", pa.int64())])))]),
     {"by_pos": [(1, {"qty": 1}), (2, {"qty": -(1 << 33)})]},
     "row 8: value.by_pos.value.qty value -8589934592 does not fit int32"),
])
def test_bad_row_names_row_and_field(text, t, row, words):
    enc = ProtobufEncoder(text, t, 1)
    good = {k: None for k in row} if "id" not in row else {"id": 1}
    if "states" in row or "by_pos" in row:      # elements before the bad row's
        good = {k: v[:1] for k, v in row.items()}
    with pytest.raises(BadRowError, match=words):
        enc.encode(pa.array([good, row], t), first_row=7)


@random_settings(10)
@given(spec=SPECS, seed=SEEDS)
def test_random_schemas_written_and_parsed_by_protobuf(tmp_path, spec, seed):
    # hypothesis-generated schemas (test_protobuf_hypothesis's): every scalar, enums (open
    # ones with unknown numbers), nested/repeated messages, maps, oneofs, Timestamp and
    # Duration, proto2 and proto3; random messages' Spark rows written by us, parsed back
    text, mod, msgs = random_messages(tmp_path, spec, seed, "hw", 40)
    _round_trip(text, mod.Top, msgs, sid=3)

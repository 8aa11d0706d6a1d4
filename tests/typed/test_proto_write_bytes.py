"""The compiled ProtobufEncoder byte for byte against protobuf's own ``SerializeToString``:
hypothesis-generated schemas (proto2 and proto3, every scalar, enums with unknown numbers,
nested and repeated messages, maps, oneofs, Timestamp/Duration) and messages built by
protoc's classes; and a batch with a null at every level (rows, nested structs, lists,
maps, wrappers, times, and bad values under null parents, which are never written).
No Spark."""
from __future__ import annotations

import pyarrow as pa
import pytest
from google.protobuf.descriptor import FieldDescriptor as FD
from hypothesis import given

from spark_kafkalog.errors import BadRowError
from spark_kafkalog.typed.proto_write import ProtobufEncoder
from spark_kafkalog.typed.protobuf import ProtobufDecoder
from tests.typed.proto_oracle import _ints, compile_module, spark_value
from tests.typed.test_protobuf import RICH
from tests.typed.proto_random import SEEDS, SPECS, random_messages, random_settings

_UNSIGNED = (FD.TYPE_UINT32, FD.TYPE_FIXED32, FD.TYPE_UINT64, FD.TYPE_FIXED64)


def _micro_times(msg):
    """Timestamps and Durations that a microsecond column holds exactly (Spark's type):
    nanos a multiple of 1000, a Timestamp's >= 0, a Duration's of the seconds' sign."""
    for fd in msg.DESCRIPTOR.fields:
        mt = fd.message_type
        if mt is None or mt.GetOptions().map_entry:
            continue
        items = list(getattr(msg, fd.name)) if fd.is_repeated else \
            ([getattr(msg, fd.name)] if msg.HasField(fd.name) else [])
        for m in items:
            if mt.name in ("Timestamp", "Duration"):
                n = abs(m.nanos) // 1000 * 1000
                m.nanos = -n if mt.name == "Duration" and m.seconds < 0 else n
            else:
                _micro_times(m)


def _map_order(row, msg):
    """``row`` (spark_value's, maps sorted by key) with each map's entries in the order
    protobuf's serializer writes them: upb encodes back to front, so the reverse of the
    map's iteration order."""
    for fd in msg.DESCRIPTOR.fields:
        mt = fd.message_type
        if mt is None or row.get(fd.name) is None:
            continue
        if mt.GetOptions().map_entry:
            kfd = mt.fields_by_name["key"]
            at = {k: -i for i, k in enumerate(getattr(msg, fd.name))}
            bits = 64 if kfd.type in (FD.TYPE_UINT64, FD.TYPE_FIXED64) else 32
            back = (lambda k: k % (1 << bits)) if kfd.type in _UNSIGNED else (lambda k: k)
            row[fd.name].sort(key=lambda kv: at[back(kv[0])])
        elif mt.name not in ("Timestamp", "Duration"):
            subs = row[fd.name] if fd.is_repeated else [row[fd.name]]
            msgs = getattr(msg, fd.name) if fd.is_repeated else [getattr(msg, fd.name)]
            for r, m in zip(subs, msgs):
                _map_order(r, m)
    return row


@random_settings(15)
@given(spec=SPECS, seed=SEEDS)
def test_random_messages_are_serialize_to_string_bytes(tmp_path, spec, seed):
    text, mod, msgs = random_messages(tmp_path, spec, seed, "hb", 60)
    for m in msgs:
        _micro_times(m)
    t = ProtobufDecoder(text).arrow_type
    rows = [_map_order(spark_value(m), m) for m in msgs]
    enc = ProtobufEncoder(text, t, 3)
    out = enc.encode(pa.array(rows, _ints(t)).cast(t))
    out.validate(full=True)
    want = [b"\x00\x00\x00\x00\x03\x00" + m.SerializeToString()
            for m in msgs]
    for k, (got, exp) in enumerate(zip(out.to_pylist(), want)):
        assert got == exp, (k, text, msgs[k])


def test_nulls_at_every_level(tmp_path):
    mod = compile_module(tmp_path, RICH)
    t = ProtobufDecoder(RICH).arrow_type
    line_t = t.field("first").type
    empty = {f.name: None for f in t}
    rows = [
        None,                                    # a tombstone
        dict(empty),                             # every field null: the empty message
        {**empty, "id": 0, "state": "NEW", "card": None, "account": 0,
         "first": {"sku": None, "qty": None, "tags": None},
         "lines": [{"sku": None, "qty": 5, "tags": None}, {"sku": "", "qty": 0, "tags": []}],
         "packed_ints": [], "states": None, "counts": [], "blobs": [b""],
         "by_pos": [(1, {"sku": None, "qty": None, "tags": None})],
         "maybe": {"value": None}, "label": None, "times": [], "at": None, "took": 0},
        {**empty, "voucher": {"sku": "v", "qty": None, "tags": ["a"]}, "maybe": {"value": 0},
         "label": {"value": ""}, "counts": [("k", 0)], "packed_doubles": [-0.0, 0.0]},
    ]
    arr = pa.array(rows, _ints(t)).cast(t)
    # a null struct whose children hold what could not be written (a null element of a
    # repeated field, a value outside int32) and a null list holding a null element: the
    # encoder never looks under a null
    bad_first = pa.StructArray.from_arrays(
        [pa.array(["x"]), pa.array([7], pa.int32()),
         pa.array([["a", None]], pa.list_(pa.string())).cast(line_t.field("tags").type)],
        fields=list(line_t), mask=pa.array([True]))
    bad_ints = pa.ListArray.from_arrays(pa.array([0, 2], pa.int32()),
                                        pa.array([1, None], pa.int32()),
                                        type=t.field("packed_ints").type,
                                        mask=pa.array([True]))
    extra = pa.StructArray.from_arrays(
        [bad_first if f.name == "first" else bad_ints if f.name == "packed_ints"
         else pa.nulls(1, f.type) for f in t], fields=list(t))
    arr = pa.concat_arrays([arr, extra])
    out = ProtobufEncoder(RICH, t, 5).encode(arr)
    out.validate(full=True)

    o = mod.Order
    m2 = o(id=0, state=0, account=0)
    m2.first.SetInParent()
    m2.lines.add(qty=5)
    m2.lines.add()
    m2.blobs.append(b"")
    m2.by_pos[1].SetInParent()
    m2.maybe.SetInParent()
    m2.took.SetInParent()
    m3 = o()
    m3.voucher.sku = "v"
    m3.voucher.tags.append("a")
    m3.maybe.value = 0
    m3.maybe.SetInParent()
    m3.label.SetInParent()
    m3.counts["k"] = 0
    m3.packed_doubles.extend([-0.0, 0.0])
    frame = b"\x00\x00\x00\x00\x05\x00"
    assert out.to_pylist() == [None, frame, frame + m2.SerializeToString(),
                               frame + m3.SerializeToString(), frame]
    assert out.null_count == 1
    # the oneof: "account" set to its default is still written (a oneof member has presence)
    assert b"\x58\x00" in out[2].as_py()


def test_unknown_enum_numbers_and_unsigned_64(tmp_path):
    mod = compile_module(tmp_path, RICH)
    t = pa.struct([("id", pa.uint64()), ("state", pa.string())])
    enc = ProtobufEncoder(RICH, t)
    # an open enum's number without a name, as the reader names it, is written as the number
    out = enc.encode(pa.array([{"id": 5, "state": "UNKNOWN_ENUM_VALUE_State_7"},
                               {"id": None, "state": None}], t))
    assert out.to_pylist() == [mod.Order(id=5, state=7).SerializeToString(), b""]
    # an enum given as its number: any int32 is written, a wider one refused
    ti = pa.struct([("id", pa.uint64()), ("state", pa.int64())])
    enc_i = ProtobufEncoder(RICH, ti)
    assert enc_i.encode(pa.array([{"id": 5, "state": -7}], ti)).to_pylist() == \
        [mod.Order(id=5, state=-7).SerializeToString()]
    with pytest.raises(BadRowError, match="row 1: value.state value 2147483648 does not fit "
                                          "enum kl.rich.Order.State"):
        enc_i.encode(pa.array([{"id": 5, "state": 1}, {"id": 5, "state": 1 << 31}], ti))
    for row, words in [
        ({"id": 1 << 63, "state": None}, "row 4: value.id does not fit a signed 64-bit field"),
        ({"id": 1, "state": "UNKNOWN_ENUM_VALUE_State_3000000000"},
         "row 4: value.state names an enum number outside int32"),
        ({"id": 1, "state": "UNKNOWN_ENUM_VALUE_State_99999999999"},
         "row 4: value.state symbol 'UNKNOWN_ENUM_VALUE_State_99999999999' is not in enum "
         "kl.rich.Order.State"),
    ]:
        with pytest.raises(BadRowError) as e:
            enc.encode(pa.array([{"id": 1, "state": "PAID"}, row, row], t), first_row=3)
        assert str(e.value) == words

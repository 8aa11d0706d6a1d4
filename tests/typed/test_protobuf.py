"""ProtobufDecoder against the protobuf package: messages built and serialized by classes
protoc generates here, parsed back by protobuf as the oracle (Spark's from_protobuf rules
applied, proto_oracle.spark_value), and compared value for value with our column."""
from __future__ import annotations

import pickle
import random

import pyarrow as pa
import pytest
from google.protobuf.message import DecodeError

from spark_kafkalog.errors import SchemaError, SchemaResolutionError, TypedRecordError
from spark_kafkalog.typed.protobuf import ProtobufDecoder
from tests.typed.proto_oracle import compile_module, decoded_rows, frame, parse, spark_value

SCALARS = """
syntax = "proto3";
package kl.test;
message Scalars {
  double f_double = 1; float f_float = 2; int32 f_int32 = 3; int64 f_int64 = 4;
  uint32 f_uint32 = 5; uint64 f_uint64 = 6; sint32 f_sint32 = 7; sint64 f_sint64 = 8;
  fixed32 f_fixed32 = 9; fixed64 f_fixed64 = 10; sfixed32 f_sfixed32 = 11;
  sfixed64 f_sfixed64 = 12; bool f_bool = 13; string f_string = 14; bytes f_bytes = 15;
  optional int32 o_int32 = 16; optional string o_string = 17; optional bool o_bool = 18;
}
"""

RICH = """
syntax = "proto3";
package kl.rich;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
message Order {
  enum State { NEW = 0; PAID = 1; SHIPPED = 2; }
  message Line { string sku = 1; int32 qty = 2; repeated string tags = 3; }
  int64 id = 1;
  State state = 2;
  Line first = 3;
  repeated Line lines = 4;
  repeated int32 packed_ints = 5;
  repeated double packed_doubles = 6;
  repeated State states = 7;
  map<string, int64> counts = 8;
  map<int32, Line> by_pos = 9;
  oneof payment { string card = 10; int64 account = 11; Line voucher = 12; }
  google.protobuf.Timestamp at = 13;
  google.protobuf.Duration took = 14;
  google.protobuf.Int32Value maybe = 15;
  google.protobuf.StringValue label = 16;
  repeated google.protobuf.Timestamp times = 17;
  repeated bytes blobs = 18;
}
"""

PROTO2 = """
syntax = "proto2";
package kl.p2;
message P2 {
  enum Kind { A = 1; B = 2; C = 5; }
  required int32 id = 1;
  optional int32 n = 2 [default = 42];
  optional string s = 3 [default = "hello"];
  optional Kind kind = 4 [default = C];
  optional Kind kind2 = 5;
  optional double d = 6;
  repeated int32 unpacked = 7;
  repeated int32 packed = 8 [packed = true];
  optional float f = 9 [default = 1.5];
  enum Z { Z0 = 0; Z1 = 1; }
  map<int32, Z> zs = 10;
}
"""


@pytest.fixture(scope="module")
def mods(tmp_path_factory):
    d = tmp_path_factory.mktemp("proto")
    return {name: compile_module(d, text) for name, text in
            (("scalars", SCALARS), ("rich", RICH), ("p2", PROTO2))}


def _check(dec, msgs, emit_defaults=False, framing="none", prefix=b""):
    payloads = [prefix + m.SerializeToString() for m in msgs]
    res = dec.decode(pa.array(payloads, pa.binary()), framing=framing)
    res.array.validate(full=True)
    assert res.array.type == dec.arrow_type
    expected = []
    for p, m in zip(payloads, msgs):
        parsed = type(m).FromString(p[len(prefix):])
        expected.append(spark_value(parsed, emit_defaults))
    assert decoded_rows(res.array) == expected
    return res


def _rand_scalars(mod, rng):
    m = mod.Scalars()
    m.f_double = rng.choice([0.0, -1.5, 1e300, rng.uniform(-1e9, 1e9)])
    m.f_float = rng.choice([0.0, 3.5, -2.25, 1e30])
    m.f_int32 = rng.choice([0, -1, 2**31 - 1, -2**31, rng.randint(-2**31, 2**31 - 1)])
    m.f_int64 = rng.choice([0, -1, 2**63 - 1, -2**63, rng.randint(-2**63, 2**63 - 1)])
    m.f_uint32 = rng.choice([0, 2**32 - 1, rng.randint(0, 2**32 - 1)])
    m.f_uint64 = rng.choice([0, 2**64 - 1, rng.randint(0, 2**64 - 1)])
    m.f_sint32 = rng.choice([0, -1, -2**31, 2**31 - 1, rng.randint(-2**31, 2**31 - 1)])
    m.f_sint64 = rng.choice([0, -1, -2**63, 2**63 - 1, rng.randint(-2**63, 2**63 - 1)])
    m.f_fixed32 = rng.choice([0, 2**32 - 1, rng.randint(0, 2**32 - 1)])
    m.f_fixed64 = rng.choice([0, 2**64 - 1, rng.randint(0, 2**64 - 1)])
    m.f_sfixed32 = rng.choice([0, -2**31, rng.randint(-2**31, 2**31 - 1)])
    m.f_sfixed64 = rng.choice([0, -2**63, rng.randint(-2**63, 2**63 - 1)])
    m.f_bool = rng.random() < 0.5
    m.f_string = rng.choice(["", "héllo", "日本語", "x" * 300, "\0nul"])
    m.f_bytes = rng.choice([b"", b"\0\xff", bytes(range(256))])
    if rng.random() < 0.5:
        m.o_int32 = rng.choice([0, 7])
    if rng.random() < 0.5:
        m.o_string = rng.choice(["", "s"])
    if rng.random() < 0.5:
        m.o_bool = rng.random() < 0.5
    return m


def test_every_scalar_type(mods):
    mod = mods["scalars"]
    dec = ProtobufDecoder(SCALARS)
    assert dec.arrow_type == pa.struct([
        ("f_double", pa.float64()), ("f_float", pa.float32()), ("f_int32", pa.int32()),
        ("f_int64", pa.int64()), ("f_uint32", pa.int32()), ("f_uint64", pa.int64()),
        ("f_sint32", pa.int32()), ("f_sint64", pa.int64()), ("f_fixed32", pa.int32()),
        ("f_fixed64", pa.int64()), ("f_sfixed32", pa.int32()), ("f_sfixed64", pa.int64()),
        ("f_bool", pa.bool_()), ("f_string", pa.string()), ("f_bytes", pa.binary()),
        ("o_int32", pa.int32()), ("o_string", pa.string()), ("o_bool", pa.bool_())])
    rng = random.Random(38)
    msgs = [_rand_scalars(mod, rng) for _ in range(300)] + [mod.Scalars()]
    res = _check(dec, msgs)
    # proto3 without presence: the default is null (Spark's hasField); optional keeps it
    row = decoded_rows(res.array)[-1]
    assert row["f_int32"] is None and row["o_int32"] is None
    explicit = mod.Scalars(o_int32=0, o_string="")
    assert decoded_rows(dec.decode(pa.array([explicit.SerializeToString()]),
                                   framing="none").array)[0]["o_int32"] == 0


def test_emit_default_values(mods):
    mod = mods["scalars"]
    dec = ProtobufDecoder(SCALARS, emit_default_values=True)
    rng = random.Random(1)
    _check(dec, [mod.Scalars(), _rand_scalars(mod, rng)], emit_defaults=True)


def _rich(mod, rng, i):
    O = mod.Order
    m = O(id=i, state=rng.choice([0, 1, 2]))
    if rng.random() < 0.7:
        m.first.sku = rng.choice(["", "a", "bb"])
        m.first.qty = rng.randint(-5, 5)
        m.first.tags.extend(["t"] * rng.randint(0, 3))
    for _ in range(rng.randint(0, 3)):
        ln = m.lines.add(sku=f"s{rng.randint(0, 9)}", qty=rng.randint(0, 3))
        ln.tags.extend([f"g{k}" for k in range(rng.randint(0, 2))])
    m.packed_ints.extend(rng.randint(-2**31, 2**31 - 1) for _ in range(rng.randint(0, 5)))
    m.packed_doubles.extend(rng.uniform(-1, 1) for _ in range(rng.randint(0, 3)))
    m.states.extend(rng.choice([0, 1, 2, 7]) for _ in range(rng.randint(0, 3)))
    for k in range(rng.randint(0, 3)):
        m.counts[f"k{k}"] = rng.randint(-9, 9)
    for k in range(rng.randint(0, 2)):
        m.by_pos[k].sku = f"p{k}"
    pick = rng.randint(0, 3)
    if pick == 1:
        m.card = rng.choice(["", "visa"])
    elif pick == 2:
        m.account = rng.choice([0, 12])
    elif pick == 3:
        m.voucher.sku = "v"
    if rng.random() < 0.7:
        m.at.seconds = rng.randint(-2**34, 2**34)
        m.at.nanos = rng.randint(0, 999_999_999)
    if rng.random() < 0.7:
        s = rng.randint(-10**9, 10**9)
        m.took.seconds = s
        m.took.nanos = rng.randint(0, 999_999_999) * (1 if s >= 0 else -1)
    if rng.random() < 0.5:
        m.maybe.value = rng.choice([0, 5])
    if rng.random() < 0.5:
        m.label.value = "L"
    for _ in range(rng.randint(0, 2)):
        t = m.times.add()
        t.seconds = rng.randint(0, 10**9)
    m.blobs.extend([b"", b"\x01\x02"][: rng.randint(0, 2)])
    return m


def test_nested_repeated_map_oneof_enum_wkt(mods):
    mod = mods["rich"]
    dec = ProtobufDecoder(RICH)
    t = dec.arrow_type
    assert t.field("state").type == pa.string()
    assert t.field("lines").type == pa.list_(pa.field("element", t.field("first").type,
                                                      nullable=False))
    assert t.field("counts").type == pa.map_(pa.field("key", pa.string(), nullable=False),
                                             pa.field("value", pa.int64(), nullable=False))
    assert t.field("at").type == pa.timestamp("us", tz="UTC")
    assert t.field("took").type == pa.duration("us")
    assert t.field("maybe").type == pa.struct([("value", pa.int32())])
    rng = random.Random(7)
    msgs = [_rich(mod, rng, i) for i in range(400)] + [mod.Order()]
    res = _check(dec, msgs)
    rows = decoded_rows(res.array)
    # the open enum's unknown number 7 keeps Java's name
    assert any("UNKNOWN_ENUM_VALUE_State_7" in r["states"] for r in rows)
    # a oneof's set member only
    assert all(sum(r[k] is not None for k in ("card", "account", "voucher")) <= 1 for r in rows)


def test_message_fields_merge_and_last_scalar_wins(mods):
    mod = mods["rich"]
    a = mod.Order(id=1, card="x")
    a.first.sku = "one"
    a.first.tags.append("t1")
    b = mod.Order(id=2, account=5)
    b.first.qty = 3
    b.first.tags.append("t2")
    b.at.seconds = 9
    # concatenated messages merge (protobuf's MergeFrom): last scalar, merged messages,
    # appended repeated fields, the oneof's last member
    payload = a.SerializeToString() + b.SerializeToString()
    dec = ProtobufDecoder(RICH)
    got = decoded_rows(dec.decode(pa.array([payload]), framing="none").array)[0]
    assert got == spark_value(mod.Order.FromString(payload))
    assert got["first"] == {"sku": "one", "qty": 3, "tags": ["t1", "t2"]}
    # a oneof's message member set, then another member, then the message again: the
    # second member cleared the first occurrence, only the last one is left
    v1, v2 = mod.Order(), mod.Order(card="c")
    v1.voucher.sku = "first"
    v1.voucher.tags.append("a")
    v3 = mod.Order()
    v3.voucher.qty = 2
    payload = v1.SerializeToString() + v2.SerializeToString() + v3.SerializeToString()
    got = decoded_rows(dec.decode(pa.array([payload]), framing="none").array)[0]
    assert got == spark_value(mod.Order.FromString(payload))
    assert got["voucher"] == {"sku": None, "qty": 2, "tags": []} and got["card"] is None


def test_proto2_presence_defaults_and_required(mods):
    mod = mods["p2"]
    dec = ProtobufDecoder(PROTO2)
    assert not dec.arrow_type.field("id").nullable
    msgs = [mod.P2(id=1), mod.P2(id=2, n=0, s="", kind=1, kind2=2, d=0.0, f=0.0),
            mod.P2(id=3, unpacked=[1, -2, 3], packed=[4, -5])]
    res = _check(dec, msgs)
    rows = decoded_rows(res.array)
    assert rows[0] == {"id": 1, "n": 42, "s": "hello", "kind": "C", "kind2": None,
                       "d": None, "unpacked": [], "packed": [], "f": 1.5, "zs": []}
    assert rows[1]["n"] == 0 and rows[1]["d"] == 0.0
    # the required field missing: Java's parser refuses the message, and so do we
    with pytest.raises(DecodeError):
        parse(mod.P2, b"\x10\x01")
    with pytest.raises(TypedRecordError, match="required field number 1"):
        dec.decode(pa.array([b"\x10\x01"]), framing="none")
    # a closed enum's unknown number is an unknown field: absent (the default)
    unknown = b"\x08\x01" + b"\x20\x09" + b"\x28\x63"
    parsed = mod.P2.FromString(unknown)
    got = decoded_rows(dec.decode(pa.array([unknown]), framing="none").array)[0]
    assert got == spark_value(parsed)
    assert got["kind"] == "C" and got["kind2"] is None
    # a map entry whose value is a closed enum's unknown number is left out whole
    entries = b"\x08\x01" + b"\x52\x04\x08\x05\x10\x01" + b"\x52\x04\x08\x06\x10\x07"
    got = decoded_rows(dec.decode(pa.array([entries]), framing="none").array)[0]
    assert got == spark_value(mod.P2.FromString(entries)) and got["zs"] == [(5, "Z1")]
    # packed and unpacked encodings of one repeated field both read
    mixed = b"\x08\x01" + b"\x38\x07" + b"\x3a\x02\x08\x09" + b"\x42\x01\x01" + b"\x40\x02"
    assert decoded_rows(dec.decode(pa.array([mixed]), framing="none").array)[0] == \
        spark_value(mod.P2.FromString(mixed))


def test_confluent_framing_from_its_serializer(mods, tmp_path):
    import warnings
    with warnings.catch_warnings(record=True):
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext
        client = SchemaRegistryClient.new_client({"url": "mock://proto-tests"})
    mod = mods["rich"]
    ctx = SerializationContext("orders", MessageField.VALUE)
    ser = ProtobufSerializer(mod.Order, client, {"use.deprecated.format": False})
    line_ctx = SerializationContext("lines", MessageField.VALUE)
    line_ser = ProtobufSerializer(mod.Order.Line, client, {"use.deprecated.format": False})
    rng = random.Random(3)
    msgs = [_rich(mod, rng, i) for i in range(50)]
    values = [ser(m, ctx) for m in msgs]
    reg = client.get_latest_version("orders-value")
    # the Python client registers the schema as base64 of its FileDescriptorProto
    dec = ProtobufDecoder(reg.schema.schema_str, {reg.schema_id: reg.schema.schema_str})
    got = decoded_rows(dec.decode(pa.array(values, pa.binary())).array)
    assert got == [spark_value(m) for m in msgs]
    # a nested message's indexes ([0, 0]: Order, then its first nested type Line)
    lines = [mod.Order.Line(sku="a", qty=1, tags=["x"]), mod.Order.Line()]
    lvals = [line_ser(m, line_ctx) for m in lines]
    lreg = client.get_latest_version("lines-value")
    assert lvals[0][5:8] == b"\x04\x00\x00"     # count 2, 0, 0 (zigzag)
    ldec = ProtobufDecoder(RICH, {lreg.schema_id: lreg.schema.schema_str},
                           message="kl.rich.Order.Line")
    assert decoded_rows(ldec.decode(pa.array(lvals)).array) == [spark_value(m) for m in lines]
    # the Order decoder refuses Line's indexes under its own id
    bad = frame(reg.schema_id, lines[0].SerializeToString(), b"\x04\x00\x00")
    with pytest.raises(TypedRecordError, match="do not name the reader's message"):
        dec.decode(pa.array([bad]))


V1 = """
syntax = "proto3";
package kl.evo;
message User { int64 id = 1; string name = 2; int32 legacy = 3; repeated string emails = 5; }
"""
V2 = """
syntax = "proto3";
package kl.evo;
message User {
  int64 id = 1; string name = 2; reserved 3;
  repeated string emails = 5; optional int32 age = 6; Address home = 7;
  message Address { string city = 1; }
  uint64 id64 = 8;
}
"""
V_BAD = """
syntax = "proto3";
package kl.evo;
message User { string id = 1; }
"""


def test_evolution_by_field_number(tmp_path):
    # the oracle's classes live in the process-wide pool: v1 gets a package of its own
    # there (its bytes do not name it); the decoder gets the text as registered
    m1 = compile_module(tmp_path, V1.replace("kl.evo", "kl.evo_one"), "evo_v1")
    m2 = compile_module(tmp_path, V2, "evo_v2")
    old = [m1.User(id=i, name=f"n{i}", legacy=9, emails=["e"] * i) for i in range(5)]
    new = [m2.User(id=10 + i, name="m", emails=["x"], age=i, id64=2**64 - 1) for i in range(5)]
    for u in new[::2]:
        u.home.city = "c"
    values = [frame(1, m.SerializeToString()) for m in old] + \
             [frame(2, m.SerializeToString()) for m in new]
    dec = ProtobufDecoder(V2, {1: V1, 2: V2})
    got = decoded_rows(dec.decode(pa.array(values)).array)
    # the oracle: protobuf parsing each writer's bytes with the reader's class (unknown
    # field 3 skipped, fields the writer lacks absent)
    want = [spark_value(m2.User.FromString(v[6:])) for v in values]
    assert got == want
    assert got[0]["age"] is None and got[0]["home"] is None and got[1]["emails"] == ["e"]
    # a reader of the old version skips the fields it does not know
    dec1 = ProtobufDecoder(V1, {1: V1, 2: V2})
    assert decoded_rows(dec1.decode(pa.array(values)).array) == \
        [spark_value(m1.User.FromString(v[6:])) for v in values]


def test_unresolvable_writer_refused_at_construction():
    with pytest.raises(SchemaResolutionError, match="schema id 4.*id.*wire encodings differ"):
        ProtobufDecoder(V2, {4: V_BAD})
    other = 'syntax = "proto3"; package zz; message Other { int32 a = 1; }\nmessage User2 {}'
    with pytest.raises(SchemaResolutionError, match="no message kl.evo.User2"):
        ProtobufDecoder('syntax = "proto3"; package kl.evo; message User {}\n'
                        'message User2 { int32 a = 1; }', {1: other},
                        message="kl.evo.User2")


def test_schema_errors():
    with pytest.raises(SchemaError, match="recursive"):
        ProtobufDecoder('syntax = "proto3"; message N { int32 v = 1; N next = 2; }')
    with pytest.raises(SchemaError, match="recursive"):
        ProtobufDecoder('syntax = "proto3"; message A { B b = 1; }\n'
                        'message B { repeated A a = 1; }')
    with pytest.raises(SchemaError, match="does not compile"):
        ProtobufDecoder('syntax = "proto3"; message A { int32 = 1; }')
    with pytest.raises(SchemaError, match="groups"):
        ProtobufDecoder('syntax = "proto2";\n'
                        'message G { optional group X = 1 { optional int32 a = 2; } }')


def test_imports_from_named_types(tmp_path):
    common = ('syntax = "proto3"; package kl.common;\n'
              'message Money { int64 units = 1; string cur = 2; }')
    main = ('syntax = "proto3"; package kl.shop; import "kl/common.proto";\n'
            'message Cart { kl.common.Money total = 1; repeated kl.common.Money items = 2; }')
    (tmp_path / "kl").mkdir()
    mod = compile_module(tmp_path, main, "cart_main", {"kl/common.proto": common})
    m = mod.Cart()
    m.total.units = 5
    m.total.cur = "EUR"
    m.items.add(units=1)
    dec = ProtobufDecoder(main, {3: main}, named_types={"kl/common.proto": common})
    assert decoded_rows(dec.decode(pa.array([frame(3, m.SerializeToString())])).array) == \
        [spark_value(m)]


def test_bad_records_under_each_mode(mods):
    mod = mods["scalars"]
    good = frame(1, mod.Scalars(f_int32=5).SerializeToString())
    cases = [
        (b"", "empty value", None),
        (b"\x01\0\0\0\1\0", "magic byte 1", None),
        (b"\0\0\0", "shorter than the 5-byte", None),
        (frame(9, b""), "unknown schema id 9", 9),
        (frame(1, b"\x08"), "truncated", 1),
        (frame(1, b"\x72\x05ab"), "length 5 past the end", 1),
        (frame(1, b"\x72\x02\xff\xfe"), "not valid UTF-8", 1),
        (frame(1, b"\x00\x01"), "invalid tag", 1),
        (frame(1, b"\x0f"), "invalid wire type 7", 1),
        (frame(1, b"\x08" + b"\xff" * 11), "varint longer", 1),
    ]
    dec = ProtobufDecoder(SCALARS, {1: SCALARS})
    for payload, text, sid in cases:
        with pytest.raises(TypedRecordError, match=text) as ei:
            dec.decode(pa.array([good, payload]))
        assert ei.value.row == 1 and ei.value.schema_id == sid
    values = pa.array([good] + [c[0] for c in cases] + [None, good])
    res = dec.decode(values, on_error="null")
    n = len(cases)
    assert res.array.null_count == n + 1
    assert res.array[0].as_py()["f_int32"] == 5 and res.array[n + 2].as_py()["f_int32"] == 5
    errs = res.errors.to_pylist()
    assert errs[0] is None and errs[-1] is None and errs[-2] is None
    for (_, text, _), e in zip(cases, errs[1:]):
        assert text in e
    res.array.validate(full=True)
    res = dec.decode(values, on_error="skip")
    assert len(res.array) == 3 and res.kept.to_pylist() == [True] + [False] * n + [True, True]
    assert res.array.to_pylist()[1] is None
    res.array.validate(full=True)


def test_truncated_at_every_byte(mods):
    mod = mods["rich"]
    rng = random.Random(11)
    dec = ProtobufDecoder(RICH)
    for i in range(6):
        full = _rich(mod, rng, i).SerializeToString()
        cuts = [full[:k] for k in range(len(full))]
        res = dec.decode(pa.array(cuts, pa.binary()), framing="none", on_error="null")
        res.array.validate(full=True)
        rows = decoded_rows(res.array)
        for k, cut in enumerate(cuts):
            try:
                want = spark_value(parse(mod.Order, cut))
            except DecodeError:
                assert res.errors[k].as_py() is not None, k
                continue
            assert res.errors[k].as_py() is None, (k, res.errors[k])
            assert rows[k] == want


def test_random_bytes_agree_with_protobuf(mods):
    rng = random.Random(5)
    for name, cls, schema in (("rich", "Order", RICH), ("p2", "P2", PROTO2),
                              ("scalars", "Scalars", SCALARS)):
        klass = getattr(mods[name], cls)
        dec = ProtobufDecoder(schema)
        seeds = [klass().SerializePartialToString()]
        if name == "rich":
            seeds = [_rich(mods[name], rng, i).SerializeToString() for i in range(20)]
        payloads = []
        for _ in range(1500):
            if rng.random() < 0.5:
                payloads.append(bytes(rng.randrange(256) for _ in range(rng.randint(0, 24))))
            else:          # flip bytes of a valid message
                b = bytearray(rng.choice(seeds) or b"\x08\x01")
                for _ in range(rng.randint(1, 3)):
                    b[rng.randrange(len(b))] = rng.randrange(256)
                payloads.append(bytes(b))
        res = dec.decode(pa.array(payloads, pa.binary()), framing="none", on_error="null")
        res.array.validate(full=True)
        rows = decoded_rows(res.array)
        for k, p in enumerate(payloads):
            try:
                want = spark_value(parse(klass, p))
            except DecodeError:
                assert res.errors[k].as_py() is not None, (name, p)
                continue
            assert res.errors[k].as_py() is None, (name, p, res.errors[k])
            assert rows[k] == want, (name, p)


def _without_protoc(blob):
    """Unpickle a decoder where protoc is unavailable: its output travels in the pickle."""
    from spark_kafkalog.typed import proto_schema
    saved = dict(proto_schema.COMPILED)
    proto_schema.COMPILED.clear()
    protoc, proto_schema._protoc = proto_schema._protoc, None
    try:
        return pickle.loads(blob)
    finally:
        proto_schema._protoc = protoc
        proto_schema.COMPILED.update(saved)


@pytest.mark.parametrize("base64_schema", [False, True])
def test_pickles_and_reuses(mods, base64_schema):
    schema = SCALARS
    if base64_schema:       # a descriptor (as confluent-kafka registers): its import of a
        import base64       # well-known type is compiled by protoc, and pickled too
        from google.protobuf import descriptor_pb2
        fdp = descriptor_pb2.FileDescriptorProto()
        mods["rich"].DESCRIPTOR.CopyToProto(fdp)
        schema = base64.b64encode(fdp.SerializeToString()).decode()
        dec = ProtobufDecoder(schema, {1: schema}, message="kl.rich.Order.Line")
        assert _without_protoc(pickle.dumps(dec)).arrow_type == dec.arrow_type
    dec = ProtobufDecoder(SCALARS, {1: SCALARS})
    dec2 = _without_protoc(pickle.dumps(dec))
    v = pa.array([frame(1, mods["scalars"].Scalars(f_string="x").SerializeToString())])
    assert dec2.decode(v).array.equals(dec.decode(v).array)
    assert dec.decode(v.slice(1)).array.to_pylist() == []
    chunked = pa.chunked_array([v, v])
    assert len(dec.decode(chunked).array) == 2


def test_sliced_large_and_nullable_inputs(mods):
    mod = mods["rich"]
    rng = random.Random(9)
    payloads = [frame(1, _rich(mod, rng, i).SerializeToString()) if i % 4 else None
                for i in range(40)]
    arr = pa.array(payloads, pa.binary())
    dec = ProtobufDecoder(RICH, {1: RICH})
    whole = dec.decode(arr).array
    part = dec.decode(arr.slice(5, 17)).array
    part.validate(full=True)
    assert part.to_pylist() == whole.slice(5, 17).to_pylist()
    big = dec.decode(arr.cast(pa.large_binary())).array
    assert big.equals(whole)
    assert whole.null_count == 10


def test_unwrapped_wrappers(mods):
    """Spark's unwrap.primitive.wrapper.types: a wrapper is its value (null when the
    wrapper is absent, the value's zero when only the wrapper is there)."""
    mod = mods["rich"]
    dec = ProtobufDecoder(RICH, unwrap_wrappers=True)
    assert dec.arrow_type.field("maybe").type == pa.int32()
    assert dec.arrow_type.field("label").type == pa.string()
    rng = random.Random(21)
    msgs = [_rich(mod, rng, i) for i in range(200)]
    empty = mod.Order()
    empty.maybe.SetInParent()
    msgs.append(empty)
    rows = decoded_rows(dec.decode(pa.array([m.SerializeToString() for m in msgs]),
                                   framing="none").array)
    for m, row in zip(msgs, rows):
        want = spark_value(m)
        for k in ("maybe", "label"):
            want[k] = getattr(m, k).value if m.HasField(k) else None
        assert row == want
    assert rows[-1]["maybe"] == 0 and rows[-1]["label"] is None

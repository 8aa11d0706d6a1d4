"""Hypothesis-generated Protobuf schemas (proto2 and proto3: every scalar type, enums,
nested and repeated messages, maps, oneofs, Timestamp/Duration, field numbers up to 2**29-1)
with random messages built by protoc's classes, decoded by ours and by protobuf's parse
(the oracle, proto_oracle.spark_value), compared value for value; and random evolutions
(fields dropped, fields added) read by field number."""
from __future__ import annotations

import random

import pyarrow as pa
from hypothesis import given

from spark_kafkalog.typed.protobuf import ProtobufDecoder
from tests.typed.proto_oracle import compile_module, decoded_rows, frame, parse, spark_value
from tests.typed.proto_random import (SCALARS, SEEDS, SPECS, fill, package, proto_text,
                                      random_messages, random_settings)


def _check(dec, klass, payloads):
    res = dec.decode(pa.array(payloads, pa.binary()), on_error="null")
    res.array.validate(full=True)
    assert res.array.type == dec.arrow_type
    rows = decoded_rows(res.array)
    for k, p in enumerate(payloads):
        want = spark_value(parse(klass, p[6:]))
        assert res.errors[k].as_py() is None, res.errors[k]
        assert rows[k] == want, (k, p)


@random_settings(12)
@given(spec=SPECS, seed=SEEDS)
def test_random_schemas_and_messages(tmp_path, spec, seed):
    text, mod, msgs = random_messages(tmp_path, spec, seed, "hy", 60)
    payloads = [frame(3, m.SerializeToString()) for m in msgs]
    _check(ProtobufDecoder(text, {3: text}), mod.Top, payloads)


def _evolve(spec, rng, used):
    """The writer's spec: reader fields dropped (never a required one) or kept, and new
    fields with numbers the reader does not use."""
    out = []
    for f in spec:
        if f["label"] != "required" and rng.random() < 0.3:
            continue
        g = dict(f)
        if f["kind"] == "message":
            g["fields"] = _evolve(f["fields"], rng, set())
        out.append(g)
    taken = used | {f["number"] for f in spec}
    for i in range(rng.randint(0, 2)):
        num = next(n for n in range(50, 500) if n not in taken)
        taken.add(num)
        out.append({"name": f"w{i}", "number": num, "kind": "scalar",
                    "type": rng.choice(SCALARS), "label": rng.choice(["", "repeated"])
                    if not any("required" == x["label"] for x in spec) else "optional"})
    return out or [{"name": "w9", "number": 499, "kind": "scalar", "type": "int32",
                    "label": "optional"}]


def _label(spec):
    for f in spec:
        if f["label"] == "" and f["kind"] != "map":
            f["label"] = "optional"
        if f["kind"] == "message":
            _label(f["fields"])


@random_settings(8)
@given(spec=SPECS, seed=SEEDS)
def test_random_evolutions_by_field_number(tmp_path, spec, seed):
    proto2, reader_spec = spec
    rng = random.Random(seed)
    writer_spec = _evolve(reader_spec, rng, set())
    if proto2:      # proto2 writer fields need a label
        _label(writer_spec)
    rpkg, wpkg = package("hr", seed), package("hw", seed)
    rtext = proto_text(reader_spec, proto2, rpkg)
    wtext = proto_text(writer_spec, proto2, wpkg)
    rmod = compile_module(tmp_path, rtext, rpkg)
    wmod = compile_module(tmp_path, wtext, wpkg)
    msgs = []
    for _ in range(40):
        m = wmod.Top()
        fill(m, rng)
        msgs.append(m)
    payloads = [frame(5, m.SerializeToString()) for m in msgs]
    dec = ProtobufDecoder(rtext, {5: wtext})
    res = dec.decode(pa.array(payloads, pa.binary()), on_error="null")
    res.array.validate(full=True)
    rows = decoded_rows(res.array)
    from google.protobuf.message import DecodeError
    for k, p in enumerate(payloads):
        try:        # the oracle: the reader's class parsing the writer's bytes
            want = spark_value(parse(rmod.Top, p[6:]))
        except DecodeError:
            assert res.errors[k].as_py() is not None
            continue
        assert res.errors[k].as_py() is None, res.errors[k]
        assert rows[k] == want

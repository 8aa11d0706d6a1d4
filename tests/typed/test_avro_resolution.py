"""Schema resolution (the Avro specification's cases): data written by fastavro with a writer
schema, read by AvroDecoder with a reader schema, compared with fastavro's own resolving read
(``schemaless_reader(writer, reader)``); a second oracle, the ``avro`` package's
DatumReader(writer, reader), where it resolves the case too. Unresolvable pairs are refused
when the decoder is built."""
from __future__ import annotations

import io

import avro.io
import avro.schema
import pytest

from spark_kafkalog.errors import SchemaResolutionError
from spark_kafkalog.typed.avro import AvroDecoder
from tests.typed.avro_oracle import binary, dumps, encode, oracle_read, spark_value


def rec(name, *fields, **kw):
    return {"type": "record", "name": name, "fields": list(fields), **kw}


def f(name, type_, **kw):
    return {"name": name, "type": type_, **kw}


ADDR = rec("Addr", f("city", "string"), f("zip", ["null", "int"]))
COLOR = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}

CASES = {
    "promotions": (
        rec("P", f("a", "int"), f("b", "int"), f("c", "int"), f("d", "long"), f("e", "long"),
            f("g", "float"), f("s", "string"), f("y", "bytes")),
        rec("P", f("a", "long"), f("b", "float"), f("c", "double"), f("d", "float"),
            f("e", "double"), f("g", "double"), f("s", "bytes"), f("y", "string")),
        [{"a": -5, "b": 7, "c": 2**31 - 1, "d": 2**40 + 1, "e": -(2**53), "g": 1.25,
          "s": "héllo", "y": "bytes ok".encode()}],
    ),
    "numeric promotions": (
        rec("P", f("a", "int"), f("b", "int"), f("c", "int"), f("d", "long"), f("e", "long"),
            f("g", "float")),
        rec("P", f("a", "long"), f("b", "float"), f("c", "double"), f("d", "float"),
            f("e", "double"), f("g", "double")),
        [{"a": -5, "b": 7, "c": 2**31 - 1, "d": 2**40 + 1, "e": -(2**53), "g": 1.25}],
    ),
    "added fields take defaults": (
        rec("D", f("id", "int")),
        rec("D", f("id", "int"), f("n", ["null", "string"], default=None),
            f("i", "long", default=-3), f("s", "string", default="dflt"),
            f("b", "bytes", default="\u00ff\u0000"), f("e", COLOR, default="GREEN"),
            f("arr", {"type": "array", "items": "int"}, default=[1, 2]),
            f("m", {"type": "map", "values": "double"}, default={"x": 1.5}),
            f("r", ADDR, default={"city": "Paris", "zip": None}),
            f("u", ["int", "string"], default=9),
            f("fx", {"type": "fixed", "name": "Two", "size": 2}, default="ab"),
            f("flag", "boolean", default=True), f("fl", "float", default=0.5)),
        [{"id": 1}, {"id": 2}],
    ),
    "removed fields are skipped": (
        rec("S", f("drop1", ADDR), f("keep", "string"),
            f("drop2", {"type": "array", "items": {"type": "map", "values": ["null", "long"]}}),
            f("drop3", ["null", "string", "double"]), f("drop4", {"type": "fixed", "name": "F3", "size": 3}),
            f("drop5", COLOR), f("drop6", "float"), f("drop7", "boolean"), f("last", "long")),
        rec("S", f("last", "long"), f("keep", "string")),
        [{"drop1": {"city": "a", "zip": 1}, "keep": "k", "drop2": [{"x": 1, "y": None}, {}],
          "drop3": 2.5, "drop4": b"xyz", "drop5": "BLUE", "drop6": 1.0, "drop7": True, "last": 9},
         {"drop1": {"city": "", "zip": None}, "keep": "", "drop2": [], "drop3": None,
          "drop4": b"\0\0\0", "drop5": "RED", "drop6": 0.0, "drop7": False, "last": -1}],
    ),
    "enum by name, reader default": (
        rec("E", f("c", {"type": "enum", "name": "Color", "symbols": ["BLUE", "PURPLE", "RED"]})),
        rec("E", f("c", {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"],
                         "default": "GREEN"})),
        [{"c": "BLUE"}, {"c": "PURPLE"}, {"c": "RED"}],
    ),
    "field and record aliases": (
        rec("Old", f("before", "int"), f("other", "string"), namespace="a"),
        rec("New", f("after", "long", aliases=["before"]), f("other", "string"),
            namespace="a", aliases=["Old"]),
        [{"before": 3, "other": "o"}],
    ),
    "writer union to reader union": (
        rec("U", f("v", ["null", "int", "string"])),
        rec("U", f("v", ["string", "null", "long", "bytes"])),
        [{"v": None}, {"v": 4}, {"v": "s"}],
    ),
    "writer plain into reader union": (
        rec("W", f("a", "int"), f("b", "string"), f("c", ADDR)),
        rec("W", f("a", ["null", "long"]), f("b", ["null", "int", "string"]), f("c", ["null", ADDR])),
        [{"a": 1, "b": "x", "c": {"city": "c", "zip": 2}}],
    ),
    "writer union into reader plain": (
        rec("X", f("a", ["int", "long"])),
        rec("X", f("a", "double")),
        [{"a": 1}, {"a": 2**40}],
    ),
    "nested records in arrays and maps": (
        rec("N", f("items", {"type": "array", "items": rec("It", f("q", "int"), f("gone", "string"))}),
            f("byk", {"type": "map", "values": "It"})),
        rec("N", f("items", {"type": "array", "items": rec("It", f("q", "long"), f("new", "int", default=0))}),
            f("byk", {"type": "map", "values": "It"})),
        [{"items": [{"q": 1, "gone": "g"}, {"q": 2, "gone": ""}], "byk": {"k": {"q": 5, "gone": "z"}}}],
    ),
    "reader timestamp-millis over a writer long": (
        rec("T", f("t", "long"), f("i", "int")),
        rec("T", f("t", {"type": "long", "logicalType": "timestamp-millis"}),
            f("i", {"type": "long", "logicalType": "local-timestamp-millis"})),
        [{"t": 1_600_000_000_123, "i": 5}],
    ),
}


def _avro_pkg_read(writer, reader, payload):
    w, r = avro.schema.parse(dumps(writer)), avro.schema.parse(dumps(reader))
    return avro.io.DatumReader(w, r).read(avro.io.BinaryDecoder(io.BytesIO(payload)))


@pytest.mark.parametrize("case", sorted(CASES))
def test_resolution_against_fastavro(case):
    writer, reader, records = CASES[case]
    payloads = encode(writer, records, schema_id=11)
    dec = AvroDecoder(dumps(reader), {11: dumps(writer)})
    got = dec.decode(binary(payloads)).array
    got.validate(full=True)
    want = [spark_value(reader, oracle_read(writer, p[5:], reader)) for p in payloads]
    if case == "added fields take defaults":
        # fastavro hands a bytes/fixed default back as the JSON string; the specification
        # says its code points 0-255 are the bytes
        for w in want:
            w["b"], w["fx"] = w["b"].encode("latin-1"), w["fx"].encode("latin-1")
    assert got.to_pylist() == want


AVRO_PKG_CASES = ["numeric promotions", "removed fields are skipped", "writer union to reader union",
                  "writer plain into reader union", "nested records in arrays and maps"]


@pytest.mark.parametrize("case", AVRO_PKG_CASES)
def test_resolution_against_the_avro_package(case):
    writer, reader, records = CASES[case]
    payloads = encode(writer, records)
    got = AvroDecoder(dumps(reader), {0: dumps(writer)}).decode(
        binary([b"\0\0\0\0\0" + p for p in payloads])).array.to_pylist()
    want = [spark_value(reader, _avro_pkg_read(writer, reader, p)) for p in payloads]
    assert got == want


def test_several_writers_one_column():
    v1 = rec("Ev", f("id", "int"), namespace="app")
    v2 = rec("Ev", f("id", "long"), f("note", ["null", "string"], default=None), namespace="app")
    v3 = rec("Ev", f("id", "long"), f("note", ["null", "string"], default=None),
             f("kind", "string", default="k"), namespace="app")
    rows = (encode(v1, [{"id": 1}], 1) + encode(v2, [{"id": 2, "note": "n"}], 2)
            + encode(v3, [{"id": 3, "note": None, "kind": "z"}], 3) + encode(v1, [{"id": 4}], 1))
    dec = AvroDecoder(dumps(v3), {1: dumps(v1), 2: dumps(v2), 3: dumps(v3)})
    assert dec.decode(binary(rows)).array.to_pylist() == [
        {"id": 1, "note": None, "kind": "k"}, {"id": 2, "note": "n", "kind": "k"},
        {"id": 3, "note": None, "kind": "z"}, {"id": 4, "note": None, "kind": "k"}]


REFUSED = {
    "missing default": (rec("R", f("a", "int")), rec("R", f("a", "int"), f("b", "int")), r"R\.b"),
    "type mismatch": (rec("R", f("a", "string")), rec("R", f("a", "int")), r"R\.a"),
    "no demotion": (rec("R", f("a", "long")), rec("R", f("a", "int")), r"R\.a"),
    "enum symbol without default": (
        rec("R", f("c", {"type": "enum", "name": "C", "symbols": ["A", "B"]})),
        rec("R", f("c", {"type": "enum", "name": "C", "symbols": ["A"]})), r"symbol B"),
    "union branch unmatched": (rec("R", f("u", ["null", "int", "boolean"])),
                               rec("R", f("u", ["null", "int"])), r"R\.u"),
    "record name differs": (rec("A", f("x", "int"), namespace="p"), rec("B", f("x", "int"), namespace="q"),
                            r"p\.A"),
    "fixed size differs": (rec("R", f("x", {"type": "fixed", "name": "F", "size": 2})),
                           rec("R", f("x", {"type": "fixed", "name": "F", "size": 3})), r"size"),
    "decimal scale differs": (
        rec("R", f("x", {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 1})),
        rec("R", f("x", {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2})),
        r"scale"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_unresolvable_writer_refused_at_construction(case):
    writer, reader, where = REFUSED[case]
    with pytest.raises(SchemaResolutionError, match=where) as info:
        AvroDecoder(dumps(reader), {77: dumps(writer)})
    text = str(info.value)
    assert "id 77" in text and reader["name"] in text and writer["name"] in text


def test_union_branch_exact_match_before_promotion():
    # Java's Avro (ResolvingGrammarGenerator.bestBranch) takes the reader branch of the same
    # type before one the writer's promotes to; fastavro takes the first that promotes. A
    # bytes value in [string, bytes] stays bytes, as a Java consumer reads it.
    u = rec("B", f("v", ["string", "bytes"]))
    rows = encode(u, [{"v": b"\x80"}, {"v": "s"}], schema_id=1)
    got = AvroDecoder(dumps(u), {1: dumps(u)}).decode(binary(rows)).array.to_pylist()
    assert got == [{"v": {"member0": None, "member1": b"\x80"}},
                   {"v": {"member0": "s", "member1": None}}]

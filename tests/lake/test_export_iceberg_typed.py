"""The Iceberg export with typed values (issue 39 item 1) and the table's schema evolving
with the subject's: values encoded by fastavro under two versions of ``orders-value``
(tests/typed/typed_logs.py: v2 promotes ``amount`` int -> long and adds ``note`` and
``tags`` with defaults), registered in a ``_schemas`` topic as KafkaStore writes it.
The table is read back by Apache Iceberg's Java library and by pyiceberg and compared
row for row with ``log.read_table(..., value_format="avro")`` of the same offsets, read
at the time of each run (so a run-1 row has the fields v1 had, the fields v2 added null
— Iceberg's rule for a column added later — and not v2's defaults)."""
from __future__ import annotations

import pytest

from spark_kafkalog.errors import TableError
from spark_kafkalog.jobs import run_job
from spark_kafkalog.lake import export_topics, open_catalog
from spark_kafkalog.lake.iceberg_table import open_table
from spark_kafkalog.lake.iceberg_typed import TypedRecords, typed_records
from spark_kafkalog.log import LogDirs, read_table
from tests.lake.oracle import JavaReader, metadata_location
from tests.log.logbuilder import LogDirBuilder, rec
from tests.typed import registry_records as rr
from tests.typed import typed_logs as tl

IDENT = "kafka.orders"
T0 = 1_700_000_000_000
#: a subject whose one version turns ``amount`` into a string: no promotion of long
ALT = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "amount", "type": "string"}]}
#: a subject whose one version narrows ``amount`` back to int
NARROW = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "amount", "type": "int"}]}


def _v1_log(root):
    """``_schemas`` with orders-value v1 (id 1) only; ``orders`` (2 partitions) with v1
    values, a tombstone and a record that does not decode (partition 1, offset 2)."""
    b = LogDirBuilder(root)
    reg = b.partition("_schemas", 0)
    reg.append([rec(rr.subject_key("CONFIG"), rr.config_value("BACKWARD"), ts=T0),
                rec(rr.schema_key("orders-value", 1),
                    rr.schema_value("orders-value", 1, 1, tl.text(tl.V1)), ts=T0)])
    p0 = b.partition("orders", 0)
    p0.append([rec(b"k%d" % i, tl.framed(1, {"id": i, "amount": 10 * i}), ts=T0 + i)
               for i in range(4)] + [rec(b"k4", None, ts=T0 + 4)])
    p1 = b.partition("orders", 1)
    p1.append([rec(None, tl.framed(1, {"id": 100, "amount": -1}), ts=T0),
               rec(None, tl.framed(1, {"id": 101, "amount": 7}), ts=T0 + 1),
               rec(None, b"\x07not avro", ts=T0 + 2)], compression="gzip")
    for _, p in b.parts:
        p.high_watermark = p.log_end_offset
    b.write()
    return b


def _part(b, topic, q=0):
    return next(p for _, p in b.parts if (p.topic, p.partition) == (topic, q))


def _add_v2(b):
    """orders-value v2 (id 2) registered, then v2 values appended to both partitions."""
    reg = _part(b, "_schemas")
    reg.append([rec(rr.schema_key("orders-value", 2),
                    rr.schema_value("orders-value", 2, 2, tl.text(tl.V2)), ts=T0 + 10)])
    for _, p in b.parts:
        if p.topic != "orders":
            continue
        q = p.partition
        p.append([rec(None, tl.framed(2, {"id": 200 + 10 * q + i, "amount": 2**40 + i,
                                          "note": None if i else f"n{q}",
                                          "tags": ["a", "b"][:i]}), ts=T0 + 20 + i)
                  for i in range(3)], compression="lz4")
    for _, p in b.parts:
        p.high_watermark = p.log_end_offset
    b.write()


def _register(b, subject, schema, sid):
    reg = _part(b, "_schemas")
    reg.append([rec(rr.schema_key(subject, 1), rr.schema_value(subject, 1, sid, tl.text(schema)),
                    ts=T0 + 30)])
    reg.high_watermark = reg.log_end_offset
    b.write()


def _export(logs, wh, **typed):
    logdirs = LogDirs(logs)
    shape = typed_records(logdirs, ["orders"], value_format="avro", **typed)
    catalog = open_catalog(str(wh))
    table = open_table(catalog, IDENT, shape, partition_by="day")
    return export_topics(logdirs, ["orders"], catalog, table, IDENT, shape=shape,
                         window_records=3)


def _rows(table, extra=("value_error",)) -> list[tuple]:
    """(partition, offset, key, value as Python, extra columns...) sorted; an Arrow
    table from read_table or a pyiceberg scan."""
    cols = [table.column(c).to_pylist() for c in ("partition", "offset", "key", "value")]
    more = [table.column(c).to_pylist() if c in table.column_names else
            [None] * table.num_rows for c in extra]
    return sorted((p, o, None if k is None else bytes(k).hex(), v, *x)
                  for p, o, k, v, *x in zip(*cols, *more))


def _java_rows(lines, extra=("value_error",)) -> list[tuple]:
    return sorted((r["partition"], r["offset"], r["key"], r["value"],
                   *((r.get("extra") or {}).get(c) for c in extra)) for r in lines)


def _with_fields(rows, fields):
    """``rows`` with each value struct given every field of ``fields`` (absent: None),
    in that order: how a row written before the fields existed reads."""
    return [(p, o, k, None if v is None else {f: v.get(f) for f in fields}, *x)
            for p, o, k, v, *x in rows]


@pytest.fixture(scope="module")
def java(tmp_path_factory):
    return JavaReader(tmp_path_factory.mktemp("iceberg-reader"))


@pytest.mark.slow
def test_typed_export_evolves_with_the_subject(tmp_path, java):
    b = _v1_log(tmp_path / "logs")
    logs, wh = b.uris(), tmp_path / "wh"
    first = _export(logs, wh, on_decode_error="null")
    assert first.status == "committed" and first.rows == 8
    run1 = _rows(read_table(logs, "orders", value_format="avro", on_decode_error="null"))
    assert [r[3] for r in run1 if r[:2] == (0, 1)] == [{"id": 1, "amount": 10}]
    assert [r[4] is not None for r in run1 if r[:2] == (1, 2)] == [True]   # value_error

    _add_v2(b)
    second = _export(logs, wh, on_decode_error="null")
    assert second.status == "committed" and second.rows == 6
    now = read_table(logs, "orders", value_format="avro", on_decode_error="null")
    run2 = [r for r in _rows(now) if r[1] >= (5 if r[0] == 0 else 3)]
    assert len(run2) == 6 and run2[0][3]["note"] == "n0" and run2[1][3]["tags"] == ["a"]
    fields = [f.name for f in now.schema.field("value").type]
    assert fields == ["id", "amount", "note", "tags"]
    expected = sorted(_with_fields(run1, fields) + run2)

    table = open_catalog(str(wh)).load_table(IDENT)
    value = table.schema().find_field("value").field_type
    assert [f.name for f in value.fields] == fields
    assert str(value.field_by_name("amount").field_type) == "long"     # int promoted
    assert len(table.schemas()) == 2        # created from v1, evolved once
    assert _rows(table.scan().to_arrow()) == expected

    head, lines = java.read_catalog(wh, IDENT, raw=True)
    assert _java_rows(lines) == expected
    assert "note" in head["schema"] and "value_error" in head["schema"]
    # the Java library reads the v1 data file with the v2 schema: the added fields null
    # there (not v2's defaults, which are Avro's, not the table's)
    old = [r for r in _java_rows(lines) if r[:2] == (0, 1)][0]
    assert old[3] == {"id": 1, "amount": 10, "note": None, "tags": None}
    assert _export(logs, wh, on_decode_error="null").status == "nothing-new"


@pytest.mark.slow
@pytest.mark.parametrize("subject,schema,sid,said", [
    ("orders_alt-value", ALT, 8, "amount changed from long to string"),
    ("orders_narrow-value", NARROW, 9, "amount narrowed from long to int")])
def test_a_change_the_table_cannot_take_is_refused_unchanged(tmp_path, capsys, subject,
                                                             schema, sid, said):
    b = _v1_log(tmp_path / "logs")
    _add_v2(b)
    logs, wh = b.uris(), tmp_path / "wh"
    assert _export(logs, wh, on_decode_error="null").status == "committed"
    before = metadata_location(wh, IDENT)
    _register(b, subject, schema, sid)
    with pytest.raises(TableError, match=said):
        _export(logs, wh, on_decode_error="null", value_subject=subject)
    assert metadata_location(wh, IDENT) == before
    # the job: one line, exit 2, the table still unchanged
    capsys.readouterr()
    code = _job(logs, wh, "--value-format", "avro", "--on-decode-error", "null",
                "--option", f"valueSubject={subject}")
    err = capsys.readouterr().err
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1
    assert metadata_location(wh, IDENT) == before


def _job(logs, wh, *flags):
    return run_job("export_iceberg", ["--path", logs, "--topic", "orders", "--warehouse",
                                      str(wh), "--table", IDENT, *flags])


@pytest.mark.slow
def test_job_exports_typed_values(tmp_path, capsys):
    b = _v1_log(tmp_path / "logs")
    _add_v2(b)
    logs, wh = b.uris(), tmp_path / "wh"
    code = _job(logs, wh, "--value-format", "avro", "--on-decode-error", "skip")
    assert code == 0, capsys.readouterr().err
    table = open_catalog(str(wh)).load_table(IDENT)
    expected = _rows(read_table(logs, "orders", value_format="avro", on_decode_error="skip"))
    assert _rows(table.scan().to_arrow()) == expected and len(expected) == 13
    assert "value_error" not in table.schema().column_names
    # a raw table refuses a typed export, and a typed one a raw export
    capsys.readouterr()
    code = _job(logs, wh)
    err = capsys.readouterr().err
    assert code == 2 and "column 'value' is struct" in err and "writes binary" in err


#: orders-value v3: ``tags`` dropped (the table keeps the column; new rows null in it)
V3_DROPPED = {**tl.V2, "fields": [f for f in tl.V2["fields"] if f["name"] != "tags"]}


@pytest.mark.slow
def test_a_field_the_subject_dropped_stays_and_reads_null(tmp_path, java):
    b = _v1_log(tmp_path / "logs")
    _add_v2(b)
    logs, wh = b.uris(), tmp_path / "wh"
    assert _export(logs, wh, on_decode_error="null").rows == 14
    before = _rows(open_catalog(str(wh)).load_table(IDENT).scan().to_arrow())
    reg = _part(b, "_schemas")
    reg.append([rec(rr.schema_key("orders-value", 3),
                    rr.schema_value("orders-value", 3, 23, tl.text(V3_DROPPED)), ts=T0 + 40)])
    tl.IDS[23] = V3_DROPPED
    try:
        p = _part(b, "orders", 1)
        p.append([rec(None, tl.framed(23, {"id": 300, "amount": 3, "note": "v3"}),
                      ts=T0 + 50)])
    finally:
        del tl.IDS[23]
    for _, part in b.parts:
        part.high_watermark = part.log_end_offset
    b.write()
    assert _export(logs, wh, on_decode_error="null").rows == 1
    table = open_catalog(str(wh)).load_table(IDENT)
    assert [f.name for f in table.schema().find_field("value").field_type.fields] == \
        ["id", "amount", "note", "tags"]
    new = (1, 6, None, {"id": 300, "amount": 3, "note": "v3", "tags": None}, None)
    assert _rows(table.scan().to_arrow()) == sorted(before + [new])
    _, lines = java.read_catalog(wh, IDENT, raw=True)
    assert _java_rows(lines) == sorted(before + [new])


#: every Avro type the decoder maps, and what Iceberg makes of it
RICH = {"type": "record", "name": "Rich", "namespace": "t", "fields": [
    {"name": "b", "type": "boolean"}, {"name": "f", "type": "float"},
    {"name": "d", "type": "double"}, {"name": "by", "type": "bytes"},
    {"name": "fx", "type": {"type": "fixed", "name": "F4", "size": 4}},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
    {"name": "m", "type": {"type": "map", "values": "long"}},
    {"name": "n", "type": {"type": "record", "name": "N",
                           "fields": [{"name": "x", "type": ["null", "int"]}]}},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10,
                             "scale": 2}},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "dt", "type": {"type": "int", "logicalType": "date"}},
    {"name": "un", "type": ["null", "string", "long"]},
    {"name": "arr", "type": {"type": "array", "items": "N"}}]}


def _rich(i):
    import datetime as dt
    import decimal

    return {"b": i % 2 == 0, "f": 1.5 * i, "d": 0.25 * i, "by": bytes([i, 255]),
            "fx": bytes([i] * 4), "e": "AB"[i % 2], "m": {"a": i, "b": -i},
            "n": {"x": None if i == 1 else i},
            "dec": decimal.Decimal(f"{i}.{i:02d}"),
            "ts": dt.datetime(2024, 1, 1 + i, 12, 0, 0, 123000, tzinfo=dt.timezone.utc),
            "dt": dt.date(2024, 2, 1 + i), "un": [None, f"s{i}", i][i % 3],
            "arr": [{"x": j} for j in range(i)]}


def _plain(v):
    """A value of read_table's Arrow (to_pylist) in the Java reader's JSON terms."""
    import datetime as dt
    import decimal

    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        if v and all(isinstance(x, tuple) and len(x) == 2 for x in v):   # a map
            return {k: _plain(x) for k, x in v}
        return [_plain(x) for x in v]
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, dt.datetime):
        return (v - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(
            microseconds=1)
    if isinstance(v, dt.date):
        return (v - dt.date(1970, 1, 1)).days
    return v


@pytest.mark.slow
def test_every_avro_type_and_a_typed_key(tmp_path, java):
    b = LogDirBuilder(tmp_path / "logs")
    reg = b.partition("_schemas", 0)
    reg.append([rec(rr.schema_key("rich-value", 1),
                    rr.schema_value("rich-value", 1, 31, tl.text(RICH)), ts=T0),
                rec(rr.schema_key("rich-key", 1),
                    rr.schema_value("rich-key", 1, 32, tl.text("string")), ts=T0)])

    def framed(sid, schema, datum):
        return b"\x00" + sid.to_bytes(4, "big") + tl.avro(schema, datum)

    p = b.partition("rich", 0)
    p.append([rec(framed(32, "string", f"k{i}"), framed(31, RICH, _rich(i)), ts=T0 + i)
              for i in range(4)] + [rec(framed(32, "string", "gone"), None, ts=T0 + 9)])
    for _, part in b.parts:
        part.high_watermark = part.log_end_offset
    b.write()
    logs, wh = b.uris(), tmp_path / "wh"
    logdirs = LogDirs(logs)
    shape = typed_records(logdirs, ["rich"], value_format="avro", key_format="registry")
    catalog = open_catalog(str(wh))
    table = open_table(catalog, "kafka.rich", shape)
    assert export_topics(logdirs, ["rich"], catalog, table, "kafka.rich",
                         shape=shape).rows == 5
    want = read_table(logs, "rich", value_format="avro", key_format="registry")
    expected = sorted((o, k, _plain(v)) for o, k, v in zip(
        *(want.column(c).to_pylist() for c in ("offset", "key", "value"))))
    assert expected[1][2]["m"] == {"a": 1, "b": -1} and expected[4][2] is None
    got = catalog.load_table("kafka.rich").scan().to_arrow()
    assert sorted((o, k, _plain(v)) for o, k, v in zip(
        *(got.column(c).to_pylist() for c in ("offset", "key", "value")))) == expected
    _, lines = java.read_catalog(wh, "kafka.rich", raw=True)
    assert sorted((r["offset"], r["key"], r["value"]) for r in lines) == expected


@pytest.mark.slow
def test_job_refuses_before_the_catalog(tmp_path, capsys):
    """A subject whose versions do not resolve (events-value: string -> long), an
    unknown --option and --on-decode-error without a typed column: one line, exit 2,
    and no warehouse made."""
    logs = str(tl.build(tmp_path / "logs"))
    wh = tmp_path / "wh"
    for flags, said in ((["--topic", "events", "--value-format", "avro"],
                         "SchemaResolutionError"),
                        (["--topic", "orders", "--value-format", "avro", "--option",
                          "startingOffsets=earliest"], "not a typed read option"),
                        (["--topic", "orders", "--on-decode-error", "null"],
                         "on_decode_error")):
        capsys.readouterr()
        code = run_job("export_iceberg", ["--path", logs, "--warehouse", str(wh),
                                          "--table", IDENT, *flags])
        err = capsys.readouterr().err
        assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
        assert not wh.exists()


def test_evolution_on_a_stale_table_handle_looks_again(tmp_path):
    """Two runs evolving the same table at once: the second's schema commit loses (its
    handle is stale), it reloads, finds the fields there and goes on; no second schema."""
    import json

    from spark_kafkalog.typed.columns import DecodeSpec, TypedRead

    def shape(schema):
        return TypedRecords(TypedRead((DecodeSpec("value", json.dumps(schema), None, (),
                                                  "none"),), "fail"))

    catalog = open_catalog(str(tmp_path / "wh"))
    open_table(catalog, IDENT, shape(tl.V1))
    first, second = catalog.load_table(IDENT), catalog.load_table(IDENT)
    shape(tl.V2).adopt(first, IDENT)
    evolved = shape(tl.V2)
    evolved.adopt(second, IDENT)           # stale: its commit fails, then nothing to add
    table = catalog.load_table(IDENT)
    assert len(table.schemas()) == 2
    assert [f.name for f in table.schema().find_field("value").field_type.fields] == \
        ["id", "amount", "note", "tags"]
    assert evolved.arrow_schema.field("value").type.num_fields == 4


def test_conform_lays_an_older_struct_onto_the_tables_type():
    """A window decoded with a schema that lacks a field the table has (in a list of
    structs, sliced; in a map's values) gets it as null; int -> long is cast."""
    import pyarrow as pa

    from spark_kafkalog.lake.iceberg_typed import _conform

    wide = pa.struct([("x", pa.int64()), ("y", pa.string())])
    lists = pa.array([[{"x": 1}], None, [{"x": 2}, {"x": 3}], []],
                     pa.list_(pa.struct([("x", pa.int32())]))).slice(1)
    assert _conform(lists, pa.list_(wide)).to_pylist() == \
        [None, [{"x": 2, "y": None}, {"x": 3, "y": None}], []]
    maps = pa.array([[("a", {"x": 1})], None],
                    pa.map_(pa.string(), pa.struct([("x", pa.int32())])))
    got = _conform(maps, pa.map_(pa.string(), wide))
    assert got.type == pa.map_(pa.string(), wide)
    assert got.to_pylist() == [[("a", {"x": 1, "y": None})], None]


def test_dead_letter_once_across_a_run_killed_before_its_commit(tmp_path, capsys):
    """``dead_letter``: the records that do not decode (the log's partition 1 offset 2,
    then one more appended) written raw, published before the commit; a run killed
    before its commit leaves its file, and the re-run from the same offsets (over a log
    grown since) replaces it: each record once. The job says how many and where."""
    b = _v1_log(tmp_path / "logs")
    logs, dead, wh = b.uris(), tmp_path / "dead", tmp_path / "wh"
    logdirs = LogDirs(logs)
    shape = typed_records(logdirs, ["orders"], value_format="avro", on_decode_error="skip")
    catalog = open_catalog(str(wh))
    table = open_table(catalog, IDENT, shape)

    def killed(phase):
        if phase == "before-commit":
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        export_topics(logdirs, ["orders"], catalog, table, IDENT, shape=shape,
                      dead_letter=str(dead), fault=killed, window_records=2)
    assert sorted(p.name for p in dead.iterdir()) == [
        "orders-1-00000000000000000000-00000000000000000003.parquet"]
    assert catalog.load_table(IDENT).current_snapshot() is None
    p1 = _part(b, "orders", 1)
    late = b"\x00\x00\x00\x00\x01\x02"              # id 1, then a truncated long
    p1.append([rec(None, late, ts=T0 + 9)])
    p1.high_watermark = p1.log_end_offset
    b.write()
    code = run_job("export_iceberg", ["--path", logs, "--warehouse", str(wh), "--table",
                                      IDENT, "--topic", "orders", "--value-format", "avro",
                                      "--on-decode-error", "skip", "--dead-letter", str(dead),
                                      "--no-progress"])
    assert code == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.endswith(f"; 2 records that did not decode written raw to {dead}"), line
    assert sorted(p.name for p in dead.iterdir()) == [
        "orders-1-00000000000000000000-00000000000000000004.parquet"]
    import pyarrow.parquet as pq
    t = pq.read_table(str(dead))
    assert t.column("offset").to_pylist() == [2, 3]
    assert t.column("value").to_pylist() == [b"\x07not avro", late]
    assert t.column("value_schema_id").to_pylist() == [None, 1]
    rows = catalog.load_table(IDENT).scan().to_arrow()
    assert sorted(zip(rows.column("partition").to_pylist(), rows.column("offset").to_pylist())) \
        == [(0, o) for o in range(5)] + [(1, 0), (1, 1)]


def test_dead_letter_refused_with_fail_before_the_catalog(tmp_path, capsys):
    logs = str(tl.build(tmp_path / "logs"))
    code = run_job("export_iceberg", ["--path", logs, "--warehouse", str(tmp_path / "wh"),
                                      "--table", IDENT, "--topic", "orders", "--value-format",
                                      "avro", "--dead-letter", str(tmp_path / "d")])
    err = capsys.readouterr().err
    assert code == 2 and "--dead-letter needs --on-decode-error skip or null" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "wh").exists()

"""export_iceberg ``--value-schema``: JSON values parsed into columns by a Spark DDL. The
expected columns come from Python's own ``json`` module over the values the log builder
encoded (not our parser), with the rule the export documents: a value that is not a
JSON object of the schema (a tombstone, bad JSON, a field of another type) is null in
every field column. Read back by Apache Iceberg's Java library and by pyiceberg."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_kafkalog.jobs import run_job
from spark_kafkalog.lake import open_catalog
from tests.lake.oracle import JavaReader
from tests.log.logbuilder import LogDirBuilder, rec

T0 = 1_700_000_000_000
IDENT = "kafka.t"
DDL = "id long, name string, tags array<string>, pos struct<x: double, y: double>"

VALUES = [
    b'{"id": 1, "name": "a", "tags": ["x", "y"], "pos": {"x": 1.5, "y": -2}}',
    b'{"id": 2, "name": "b"}',                                   # fields missing
    b'{"name": "c", "id": 3, "other": {"deep": [1, 2]}}',        # order, unknown field
    b'{"id": 4,\n  "name": "pretty",\n  "tags": []\n}',           # raw newlines
    b'not json at all',
    b'[1, 2, 3]',                                                # not an object
    b'{"id": "five", "name": "e"}',                              # a field of another type
    None,                                                        # a tombstone
    b'{"id": 9007199254740993, "name": "\\u00e9t\\u00e9", "pos": null}',
    b'{"id": null, "name": null, "tags": ["z", null]}',
]


def _check(doc) -> bool:
    """Does ``doc`` (a json.loads result) fit DDL's types, field by field."""
    def long_(v):
        return v is None or (isinstance(v, int) and not isinstance(v, bool))

    def str_(v):
        return v is None or isinstance(v, str)

    def num(v):
        return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))

    if not isinstance(doc, dict):
        return False
    tags, pos = doc.get("tags"), doc.get("pos")
    return (long_(doc.get("id")) and str_(doc.get("name"))
            and (tags is None or (isinstance(tags, list) and all(map(str_, tags))))
            and (pos is None or (isinstance(pos, dict) and num(pos.get("x"))
                                 and num(pos.get("y")))))


def expected(values) -> list[dict]:
    out = []
    for v in values:
        try:
            doc = json.loads(v) if v is not None else None
        except ValueError:
            doc = None
        if not _check(doc):
            doc = {}
        pos = doc.get("pos")
        out.append({"id": doc.get("id"), "name": doc.get("name"), "tags": doc.get("tags"),
                    "pos": None if pos is None else {"x": None if pos.get("x") is None
                                                     else float(pos["x"]),
                                                     "y": None if pos.get("y") is None
                                                     else float(pos["y"])}})
    return out


def _log(root: Path, values) -> str:
    b = LogDirBuilder(root)
    p = b.partition("t", 0)
    p.append([rec(b"k%d" % i, v, ts=T0 + i) for i, v in enumerate(values)])
    p.high_watermark = p.log_end_offset
    b.write()
    return b.uris()


def _job(tmp_path, *extra):
    return run_job("export_iceberg", ["--path", str(tmp_path / "logs"), "--warehouse",
                                      str(tmp_path / "wh"), "--table", IDENT,
                                      "--no-progress", *extra])


def test_json_values_parsed_into_columns(tmp_path):
    _log(tmp_path / "logs", VALUES)
    assert _job(tmp_path, "--value-schema", DDL) == 0
    table = open_catalog(str(tmp_path / "wh")).load_table(IDENT)
    got = table.scan().to_arrow().sort_by("offset")
    assert got.column_names[-4:] == ["id", "name", "tags", "pos"]
    assert got.column("value").to_pylist() == VALUES          # the raw value is kept
    rows = got.select(["id", "name", "tags", "pos"]).to_pylist()
    assert rows == expected(VALUES)
    assert rows[6] == {"id": None, "name": None, "tags": None, "pos": None}


def test_read_back_by_java(tmp_path):
    _log(tmp_path / "logs", VALUES)
    assert _job(tmp_path, "--value-schema", DDL) == 0
    head, rows = JavaReader(tmp_path / "java").read_catalog(tmp_path / "wh", IDENT,
                                                            raw=True)
    rows = sorted(rows, key=lambda r: r["offset"])
    assert [r["extra"] for r in rows] == expected(VALUES)


def test_a_new_field_is_added_to_the_table(tmp_path):
    """A later run with one more field: the column is added, the rows before read null."""
    _log(tmp_path / "logs", VALUES[:2])
    assert _job(tmp_path, "--value-schema", "id long") == 0
    assert _job(tmp_path, "--value-schema", "id long, name string") == 0
    table = open_catalog(str(tmp_path / "wh")).load_table(IDENT)
    assert [f.name for f in table.schema().fields][-2:] == ["id", "name"]


@pytest.mark.parametrize("extra,says", [
    (["--value-schema", "id long, offset long"], "fields ['offset'] clash with the Kafka"),
    (["--value-schema", "m map<string, int>"], "field 'm': map is not supported here"),
    (["--value-schema", "id lng"], "unknown data type 'lng'"),
    (["--value-schema", "id long", "--value-format", "avro"],
     "--value-schema (JSON values) and --value-format avro: give one"),
])
def test_bad_value_schema_is_one_line_before_anything(tmp_path, capsys, extra, says):
    _log(tmp_path / "logs", VALUES[:1])
    assert _job(tmp_path, *extra) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert says in line
    assert not list((tmp_path / "wh").rglob("*.parquet")) if (tmp_path / "wh").exists() \
        else True


def test_a_changed_type_is_refused(tmp_path, capsys):
    _log(tmp_path / "logs", VALUES[:1])
    assert _job(tmp_path, "--value-schema", "id string") == 0
    before = open_catalog(str(tmp_path / "wh")).load_table(IDENT).current_snapshot()
    capsys.readouterr()
    assert _job(tmp_path, "--value-schema", "id long") == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "cannot take --value-schema: id changed from string to long" in line
    after = open_catalog(str(tmp_path / "wh")).load_table(IDENT).current_snapshot()
    assert after.snapshot_id == before.snapshot_id


def test_upsert_with_json_columns(tmp_path):
    """--mode upsert with --value-schema: the latest value per key, parsed."""
    values = [(b"a", b'{"id": 1}'), (b"b", b'{"id": 2}'), (b"a", b'{"id": 3}'),
              (b"b", None), (b"c", b'oops')]
    b = LogDirBuilder(tmp_path / "logs")
    p = b.partition("t", 0)
    p.append([rec(k, v, ts=T0 + i) for i, (k, v) in enumerate(values)])
    p.high_watermark = p.log_end_offset
    b.write()
    assert _job(tmp_path, "--value-schema", "id long", "--mode", "upsert") == 0
    table = open_catalog(str(tmp_path / "wh")).load_table(IDENT)
    got = table.scan().to_arrow().sort_by("offset").select(["key", "offset", "id"])
    assert got.to_pylist() == [{"key": b"a", "offset": 2, "id": 3},
                               {"key": b"c", "offset": 4, "id": None}]

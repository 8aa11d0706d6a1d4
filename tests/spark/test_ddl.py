"""export's ``--value-schema`` check without a JVM (jobs/_ddl.py) against Spark's own DDL
parser, the oracle: the same strings accepted and refused, the same field names; and a
schema field no JSON value has is named in a warning after the export."""
from __future__ import annotations

import contextlib

import pytest

from spark_kafkalog import jobkit
from spark_kafkalog.jobs import export_parquet
from spark_kafkalog.jobs._ddl import DDLError, field_names
from spark_kafkalog.jobs.make_sample_log import make_sample_log

CASES = [
    "id long, name string",
    "id: long, name: string",
    "ID BIGINT, Name STRING",
    "a tinyint, b byte, c smallint, d short, e int, f integer, g float, h real, i double",
    "a boolean, b binary, c date, d timestamp, e timestamp_ntz, f timestamp_ltz",
    "price decimal(10,2), p2 dec(5), p3 numeric, p4 decimal",
    "c char(3), v varchar(10)",
    "tags array<string>, m map<string, array<int>>",
    "s struct<x: int, y: struct<z: double>>, t struct<>",
    "struct<a:int, b:string>",
    "`weird name` int, `back``tick` string",
    "a int NOT NULL, b string COMMENT 'the b'",
    "d interval day to second, y interval year",
    # refused by Spark too
    "id lng",
    "id long,",
    "id",
    "id long name string",
    "m map<string>",
    "a array<int",
    "c char",
    "a int, , b int",
    "",
    "a decimal(10,)",
    "x int)",
]


def _spark_fields(ddl: str):
    from pyspark.sql.types import StructType, _parse_datatype_string

    try:
        t = _parse_datatype_string(ddl)
    except Exception:
        return None
    return t.fieldNames() if isinstance(t, StructType) else None


@pytest.mark.parametrize("ddl", CASES)
def test_the_check_agrees_with_sparks_parser(spark, ddl):
    want = _spark_fields(ddl)
    try:
        got = field_names(ddl)
    except DDLError:
        got = None
    assert got == want, (ddl, got, want)


@pytest.fixture()
def shared(spark, monkeypatch):
    @contextlib.contextmanager
    def session(*_a, **_k):
        yield spark
    monkeypatch.setattr(jobkit, "spark_session", session)
    return spark


def test_a_field_no_value_has_is_warned(shared, tmp_path, capsys):
    logs = tmp_path / "logs"
    make_sample_log(logs, records=200, partitions=2, seed=9)
    # the sample's values have user_id, event, amount, ts: "userId" and "Event" are not
    code = jobkit.run("export_parquet", lambda: export_parquet.main(
        ["--path", str(logs), "--output", str(tmp_path / "out"), "--no-progress",
         "--value-schema", "userId long, Event string, amount double"]), argv=[])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err.splitlines() == [
        "export_parquet: warning: --value-schema fields 'userId', 'Event' not in any "
        "exported JSON value (null in every row; JSON names are case-sensitive)"]
    assert captured.out.startswith("exported 200 rows")
    code = jobkit.run("export_parquet", lambda: export_parquet.main(
        ["--path", str(logs), "--output", str(tmp_path / "out2"), "--no-progress",
         "--value-schema", "user_id long, event string, amount double"]), argv=[])
    assert code == 0 and capsys.readouterr().err == ""

"""Spark SQL reads the tables ``kafkalog job export_iceberg`` writes (issue 39, "tables
people query"): Apache Iceberg's own Spark runtime (iceberg-spark-runtime-4.1_2.13 1.12.0,
the implementation the export, pyiceberg, did not use) under pyspark 4.1 in a venv of its
own (``make spark41-venv``: Maven Central has no runtime for the pyspark 4.3 of .venv),
finding them through Iceberg's JdbcCatalog over the embedded catalog's SQLite file — the
configuration README's "Query the table with Spark SQL" gives. One Spark session in one
subprocess (tests/lake/spark_sql_queries.py) runs every query; the rows equal
``log.read_table`` of the same offsets (the upsert table: the latest record per key of
them, as Kafka's compaction leaves a topic)."""
from __future__ import annotations

import datetime
import json
import os
import re
import sqlite3
import subprocess
from pathlib import Path

import pytest

from spark_kafkalog.jobs import run_job
from spark_kafkalog.lake import NEXT_OFFSETS_KEY, OFFSETS_KEY
from spark_kafkalog.log import read_table
from tests.lake.oracle import row_tuples
from tests.log.logbuilder import LogDirBuilder, rec, sample_records
from tests.typed import typed_logs as tl

REPO = Path(__file__).resolve().parents[2]
SPARK41_PYTHON = REPO / ".cache" / "spark41-venv" / "bin" / "python"
SPARK_JARS = REPO / ".cache" / "iceberg-spark-jars"
HERE = Path(__file__).resolve().parent
DAY = 86_400_000
T0 = 1_700_000_000_000                 # 2023-11-14T22:13:20Z
#: the job's default --catalog-name: pyiceberg's SqlCatalog keeps it in every row of
#: iceberg_tables (catalog_name), and Iceberg's JdbcCatalog lists only the rows of its own
#: name, which Spark sets to the catalog's name in spark.sql.catalog.<name>
CATALOG = "kafkalog"


def spark_conf(catalog: str, warehouse: Path) -> dict:
    """The Spark conf of README's section, for ``warehouse``."""
    return {"spark.sql.extensions":
            "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
            f"spark.sql.catalog.{catalog}": "org.apache.iceberg.spark.SparkCatalog",
            f"spark.sql.catalog.{catalog}.type": "jdbc",
            f"spark.sql.catalog.{catalog}.uri": f"jdbc:sqlite:{warehouse}/kafkalog-catalog.db",
            f"spark.sql.catalog.{catalog}.warehouse": f"file://{warehouse}",
            "spark.sql.session.timeZone": "UTC"}


def run_spark_sql(tmp: Path, conf: dict, queries: dict) -> dict:
    """Every query in one Spark 4.1 session; name -> rows (or ``{"error": ...}``)."""
    for need, target in ((SPARK41_PYTHON, "spark41-venv"),
                         (SPARK_JARS / ".fetched", "spark41-venv")):
        if not need.exists():
            raise AssertionError(f"{need} is missing: run `make {target}` (pyspark 4.1 and "
                                 "Apache Iceberg's Spark runtime)")
    request = tmp / "request.json"
    request.write_text(json.dumps({"jars": sorted(str(j) for j in SPARK_JARS.glob("*.jar")),
                                   "conf": conf, "queries": queries}))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYSPARK_", "SPARK_", "PYTHONPATH"))}
    env.update(TZ="UTC", PYSPARK_PYTHON=str(SPARK41_PYTHON))
    out = subprocess.run([str(SPARK41_PYTHON), str(HERE / "spark_sql_queries.py"),
                          str(request)], capture_output=True, text=True, env=env,
                         cwd=tmp, timeout=600)
    if out.returncode:
        raise AssertionError(f"Spark 4.1 failed ({out.returncode}):\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.splitlines()[-1])


def catalog_dump(warehouse: Path) -> list:
    """The embedded catalog's SQLite schema and rows, read with sqlite3."""
    with sqlite3.connect(warehouse / "kafkalog-catalog.db") as db:
        return list(db.iterdump())


def rows_of(result: dict, name: str) -> list[dict]:
    assert "error" not in result[name], f"{name}: {result[name]['error']}"
    return result[name]["rows"]


def spark_tuples(rows: list[dict]) -> list[tuple]:
    """Spark's rows as :func:`row_tuples` gives them."""
    return sorted(((r["topic"], r["partition"], r["offset"], r["timestamp"],
                    r["timestampType"], r["key"], r["value"],
                    tuple((h["key"], h["value"]) for h in r["headers"] or ()))
                   for r in rows), key=lambda r: r[:3])


def latest_per_key(rows: list[tuple]) -> list[tuple]:
    """Kafka's compaction of :func:`row_tuples` rows: the last record of each key of a
    partition, none where it is a tombstone, none for records without a key."""
    latest: dict = {}
    for r in sorted(rows, key=lambda r: r[:3]):
        if r[5] is None:
            continue
        if r[6] is None:
            latest.pop((r[0], r[1], r[5]), None)
        else:
            latest[(r[0], r[1], r[5])] = r
    return sorted(latest.values(), key=lambda r: r[:3])


def _log(root: Path) -> LogDirBuilder:
    """``t``: two partitions over three days, headers (a null header value), null keys and
    tombstones, a gzip segment; ``c``: a compacted topic, keys updated and deleted."""
    b = LogDirBuilder(root)
    for q in range(2):
        p = b.partition("t", q)
        p.append(sample_records(20, b"a%d" % q, ts0=T0 + q * DAY, with_headers=True))
        p.roll()
        p.append(sample_records(15, b"b%d" % q, ts0=T0 + 2 * DAY, with_headers=True),
                 compression="gzip")
    c = b.partition("c", 0)
    c.append([rec(b"k%d" % (i % 5), None if i % 7 == 3 else b"v%d" % i, ts=T0 + i,
                  headers=[("h", b"%d" % i)] if i % 2 else [])
              for i in range(30)] + [rec(None, b"no key", ts=T0 + 30)])
    for _, p in b.parts:
        p.high_watermark = p.log_end_offset
    b.write()
    return b


def _grow(b: LogDirBuilder) -> None:
    for _, p in b.parts:
        if p.topic == "t":
            p.append(sample_records(9, b"c", ts0=T0 + 3 * DAY, with_headers=True),
                     compression="lz4")
        else:
            p.append([rec(b"k1", b"late", ts=T0 + 40), rec(b"k2", None, ts=T0 + 41)])
        p.high_watermark = p.log_end_offset
    b.write()


def _export(logs: str, wh: Path, topic: str, table: str, *extra: str) -> None:
    code = run_job("export_iceberg", ["--path", logs, "--warehouse", str(wh), "--topic",
                                      topic, "--table", table, "--no-progress", *extra])
    assert code == 0, f"export_iceberg {topic} -> {table} failed"


@pytest.mark.slow
def test_spark_sql_reads_the_exported_tables(tmp_path):
    b = _log(tmp_path / "logs")
    typed_logs = tl.build(tmp_path / "typed")
    logs, wh = b.uris(), tmp_path / "wh"
    first_ends = {p.partition: p.log_end_offset for _, p in b.parts if p.topic == "t"}
    _export(logs, wh, "t", "kafka.t")
    _export(logs, wh, "c", "kafka.c", "--mode", "upsert")
    _grow(b)
    _export(logs, wh, "t", "kafka.t")            # an incremental run: a second snapshot
    _export(logs, wh, "c", "kafka.c", "--mode", "upsert")
    _export(str(typed_logs), wh, "orders", "kafka.orders", "--value-format", "avro")

    since = "2023-11-16 00:00:00"                # the third day on: T0 + 2 days onwards
    since_us = 1_700_092_800_000_000
    conf = spark_conf(CATALOG, wh)
    # the same catalog under another name finds none of the tables: JdbcCatalog's rows
    # are keyed by the catalog's name (pyiceberg's catalog_name column)
    conf.update({k.replace(f".{CATALOG}", ".lake", 1): v
                 for k, v in spark_conf(CATALOG, wh).items() if ".catalog." in k})
    before = catalog_dump(wh)
    result = run_spark_sql(tmp_path, conf, {
        "t": f"SELECT * FROM {CATALOG}.kafka.t",
        "t_since": f"SELECT * FROM {CATALOG}.kafka.t WHERE timestamp >= TIMESTAMP '{since}'",
        "t_since_plan": f"EXPLAIN SELECT * FROM {CATALOG}.kafka.t "
                        f"WHERE timestamp >= TIMESTAMP '{since}'",
        "t_since_days": f"SELECT _partition.timestamp_day AS day, count(*) AS n FROM "
                        f"{CATALOG}.kafka.t WHERE timestamp >= TIMESTAMP '{since}' GROUP BY 1",
        "t_files": f"SELECT partition, record_count FROM {CATALOG}.kafka.t.files",
        "t_snapshots": f"SELECT operation, summary['{OFFSETS_KEY}'] AS offsets, summary "
                       f"FROM {CATALOG}.kafka.t.snapshots ORDER BY committed_at",
        "c": f"SELECT * FROM {CATALOG}.kafka.c",
        "c_k1": f"SELECT offset, value FROM {CATALOG}.kafka.c WHERE key = CAST('k1' AS BINARY)",
        "orders": f"SELECT topic, partition, offset, key, value FROM {CATALOG}.kafka.orders",
        "tables": f"SHOW TABLES IN {CATALOG}.kafka",
        "other_name": "SHOW TABLES IN lake.kafka",
    })

    # Iceberg's JdbcCatalog read pyiceberg's SQLite file as it is: no table migrated or added
    assert catalog_dump(wh) == before

    # append mode: every record, row for row
    expected = row_tuples(read_table(logs, "t"))
    assert len(expected) == 2 * (35 + 9)
    assert spark_tuples(rows_of(result, "t")) == expected
    # the day partition: the filter's rows, and Iceberg prunes by day(timestamp)
    assert spark_tuples(rows_of(result, "t_since")) == [r for r in expected
                                                        if r[3] >= since_us]
    days = sorted({str(f["partition"]["timestamp_day"]) for f in rows_of(result, "t_files")})
    assert days == ["2023-11-14", "2023-11-15", "2023-11-16", "2023-11-17"], days
    # the filter reaches Iceberg's scan, which keeps the files of the days it can match
    plan = rows_of(result, "t_since_plan")[0]["plan"]
    assert f"IcebergScan(table={CATALOG}.kafka.t" in plan, plan
    assert f"filters=timestamp >= {since_us}" in plan, plan
    per_day: dict = {}
    for r in expected:
        if r[3] >= since_us:
            day = datetime.datetime.fromtimestamp(r[3] / 1e6, datetime.timezone.utc)
            per_day[day.date().isoformat()] = per_day.get(day.date().isoformat(), 0) + 1
    assert {r["day"]: r["n"] for r in rows_of(result, "t_since_days")} == per_day
    assert sorted(per_day) == ["2023-11-16", "2023-11-17"]
    # our summary keys in Spark's snapshots table: one snapshot per run, each with its range
    snaps = rows_of(result, "t_snapshots")
    assert [s["operation"] for s in snaps] == ["append", "append"]
    ends = {p.partition: p.log_end_offset for _, p in b.parts if p.topic == "t"}
    assert [json.loads(s["offsets"]) for s in snaps] == [
        {"t": {str(q): [0, first_ends[q]] for q in (0, 1)}},
        {"t": {str(q): [first_ends[q], ends[q]] for q in (0, 1)}}]
    assert json.loads(snaps[-1]["summary"][NEXT_OFFSETS_KEY]) == {
        "t": {str(q): ends[q] for q in (0, 1)}}

    # upsert mode: the latest value per key of the same offsets
    c_expected = latest_per_key(row_tuples(read_table(logs, "c")))
    assert len(c_expected) == 4 and ("c", 0, 31, T0 * 1000 + 40_000, 0, b"k1".hex(),
                                     b"late".hex(), ()) in c_expected
    assert spark_tuples(rows_of(result, "c")) == c_expected
    assert rows_of(result, "c_k1") == [{"offset": 31, "value": b"late".hex()}]

    # a typed Avro value: Spark's struct equals the decoded value of read_table
    typed = read_table(str(typed_logs), "orders", value_format="avro")
    t_expected = sorted(zip(*(typed.column(c).to_pylist() for c in
                              ("topic", "partition", "offset", "key", "value"))),
                        key=lambda r: r[:3])
    t_expected = [(t, q, o, None if k is None else bytes(k).hex(), v)
                  for t, q, o, k, v in t_expected]
    assert {o: v for _, q, o, _, v in t_expected if q == 0 and o in (3, 4)} == {
        3: None, 4: {"id": 4, "amount": 2**40 + 4, "note": "n4", "tags": ["a"]}}
    got = sorted(((r["topic"], r["partition"], r["offset"], r["key"], r["value"])
                  for r in rows_of(result, "orders")), key=lambda r: r[:3])
    assert got == t_expected

    assert sorted(r["tableName"] for r in rows_of(result, "tables")) == ["c", "orders", "t"]
    # the name matters: under another name the same JdbcCatalog sees no namespace at all
    assert "NoSuchNamespaceException" in result["other_name"].get("error", ""), \
        result["other_name"]


def test_readme_gives_the_configuration_this_test_uses():
    """README's pyspark command: the same --conf settings as :func:`spark_conf` (for its
    /data/lake), and --packages the runtime and driver the pom's `iceberg-spark` profile
    fetches for the test."""
    readme = (REPO / "README.md").read_text()
    block = next(b for b in re.findall(r"```bash\n(.*?)```", readme, re.S)
                 if "spark41/bin/pyspark" in b)
    words = block.replace("\\\n", " ").split()
    start = words.index("spark41/bin/pyspark")
    confs = dict(words[i + 1].split("=", 1) for i in range(start, len(words))
                 if words[i] == "--conf")
    assert confs == spark_conf(CATALOG, Path("/data/lake"))
    pom = (REPO / "tests" / "kafka" / "pom.xml").read_text()

    def prop(name):
        return re.search(rf"<{name}>([^<]+)</{name}>", pom).group(1)

    packages = words[words.index("--packages", start) + 1].split(",")
    assert packages == [
        f"org.apache.iceberg:{prop('iceberg.spark.runtime')}:{prop('iceberg.version')}",
        f"org.xerial:sqlite-jdbc:{prop('sqlite.jdbc.version')}"]
    assert "pyspark==4.1.*" in block and prop("iceberg.spark.runtime").startswith(
        "iceberg-spark-runtime-4.1_")

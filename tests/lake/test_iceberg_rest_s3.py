"""Catalogs and object stores: Apache Iceberg's REST catalog (its own server code on
127.0.0.1, ``rest_catalog.py``) with the warehouse in S3 (moto's server on loopback, the
session server of tests/log/test_s3.py), written by ``export_iceberg`` and by the
streaming sink with the reader's S3 options, read back by Iceberg's Java library through
that REST catalog (S3FileIO: neither pyiceberg nor pyarrow) and by pyiceberg, equal to
``log.read_table`` / ``spark.read.format("kafkalog")`` of the same offsets. Marked slow:
the server's JVM starts in ~10 s and reads go through one JVM each (``make test-slow``;
``make iceberg-rest-jars`` fetches the jars)."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from spark_kafkalog.jobs import run_job
from spark_kafkalog.lake import NEXT_OFFSETS_KEY, OFFSETS_KEY, open_catalog
from spark_kafkalog.lake.iceberg_table import catalog_properties, fileio_properties
from tests.lake.oracle import row_tuples
from tests.lake.rest_catalog import RestCatalog, s3_java_properties
from tests.lake.test_export_iceberg import _expected, _grow, _log
from tests.log.test_s3 import REGION, s3_endpoint, upload  # noqa: F401  (session moto)

@pytest.fixture(scope="module")
def warehouse(s3_endpoint):  # noqa: F811
    """``(s3://bucket/wh, the reader's filesystem options, S3FileSystem)``."""
    options = {"s3.endpoint": s3_endpoint, "s3.region": REGION,
               "s3.access_key": "testing", "s3.secret_key": "testing"}
    fs = pafs.S3FileSystem(endpoint_override=s3_endpoint.split("://", 1)[1], scheme="http",
                           region=REGION, access_key="testing", secret_key="testing",
                           allow_bucket_creation=True)
    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    fs.create_dir(bucket)
    return f"s3://{bucket}/wh", options, fs


@pytest.fixture(scope="module")
def rest(tmp_path_factory, warehouse, s3_endpoint):  # noqa: F811
    """Apache Iceberg's REST catalog on 127.0.0.1 over a JdbcCatalog (SQLite file) whose
    tables live in the S3 warehouse."""
    build = tmp_path_factory.mktemp("rest-catalog")
    server = RestCatalog(build, s3_java_properties(s3_endpoint, REGION))
    server.start(f"jdbc:sqlite:{build / 'rest-catalog.db'}", warehouse[0])
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def java_rest(tmp_path_factory, rest):
    return rest.reader(tmp_path_factory.mktemp("iceberg-reader-rest"))


def _fs_flags(options):
    return [x for k, v in options.items() for x in ("--fs-option", f"{k}={v}")]


def test_fileio_properties_are_the_readers_s3_options():
    assert fileio_properties({"s3.endpoint": "http://127.0.0.1:9", "fs.s3.region": "r",
                              "s3.access_key": "a", "s3.secret_key": "s",
                              "s3.scheme": "http", "gcs.project_id": "p"}) == \
        {"s3.endpoint": "http://127.0.0.1:9", "s3.region": "r", "s3.access-key-id": "a",
         "s3.secret-access-key": "s"}
    props = catalog_properties("s3://b/wh", "http://127.0.0.1:9",
                               {"s3.region": "other"}, {"s3.region": "r"})
    assert props["type"] == "rest" and props["warehouse"] == "s3://b/wh"
    assert props["s3.region"] == "other"        # a catalog property wins


@pytest.mark.slow
def test_export_job_through_rest_into_s3_read_back_by_java(tmp_path, rest, java_rest,
                                                            warehouse):
    """The log on S3 too: one set of --fs-option flags reaches both. Two runs (the second
    incremental) through the REST catalog; Iceberg's Java RESTCatalog + S3FileIO and
    pyiceberg read the table equal to read_table of the same offsets."""
    wh, options, fs = warehouse
    bucket = wh.split("/")[2]
    ident = "kafka.rest_export"
    b = _log(tmp_path / "logs")
    logs = upload(fs, tmp_path / "logs", bucket, "logs")
    argv = ["--path", logs, "--warehouse", wh, "--catalog-uri", rest.uri, "--table", ident,
            "--no-progress", *_fs_flags(options)]
    assert run_job("export_iceberg", argv) == 0
    _grow(b, 23, b"new")
    upload(fs, tmp_path / "logs", bucket, "logs")
    assert run_job("export_iceberg", argv) == 0
    expected = _expected(str(tmp_path / "logs"))
    assert len(expected) == 206
    head, rows = java_rest.read(rest.uri, "rest", ident)
    assert rows == expected
    old, new = head["snapshots"]
    assert json.loads(new["summary"][OFFSETS_KEY]) == {"t": {"0": [80, 103], "1": [80, 103]}}
    assert json.loads(new["summary"][NEXT_OFFSETS_KEY]) == {"t": {"0": 103, "1": 103}}
    table = open_catalog(wh, rest.uri, filesystem_options=options).load_table(ident)
    assert table.location().startswith(f"{wh}/")
    assert row_tuples(table.scan().to_arrow()) == expected
    # every data file the table lists is in the bucket, and nothing else is
    listed = {t.file.file_path for t in table.scan().plan_files()}
    stored = {f"s3://{i.path}" for i in fs.get_file_info(pafs.FileSelector(
        f"{table.location()[len('s3://'):]}/data", recursive=True))
        if i.type == pafs.FileType.File}
    assert stored == listed and len(listed) >= 2


@pytest.mark.slow
def test_stream_through_rest_into_s3_equals_spark_read(spark, tmp_path, rest, java_rest,
                                                       warehouse):
    wh, options, _ = warehouse
    ident = "kafka.rest_stream"
    b = _log(tmp_path / "logs", n=30)
    logs = b.uris()

    def run():
        w = (spark.readStream.format("kafkalog").option("path", logs).option("subscribe", "t")
             .option("includeHeaders", "true").option("startingOffsets", "earliest").load()
             .writeStream.format("kafkalog_iceberg").option("table", ident)
             .option("warehouse", wh).option("catalogUri", rest.uri)
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True))
        for k, v in options.items():
            w = w.option(k, v)
        q = w.start()
        try:
            q.awaitTermination()
        finally:
            q.stop()

    run()
    _grow(b, 9, b"more")
    run()
    _, rows = java_rest.read(rest.uri, "rest", ident)
    df = (spark.read.format("kafkalog").option("path", logs).option("subscribe", "t")
          .option("includeHeaders", "true").option("startingOffsets", "earliest")
          .option("endingOffsets", '{"t":{"0":39,"1":39}}').load())
    assert rows == row_tuples(df.toArrow()) == _expected(logs)
    assert len(rows) == 78


@pytest.mark.slow
def test_export_job_with_an_sql_catalog_and_an_s3_warehouse(tmp_path, java_rest, warehouse):
    """An SQLAlchemy catalog URI (a local SQLite file) with the table's files in S3: Java's
    JdbcCatalog on the same file, with S3FileIO, reads what read_table reads."""
    wh, options, fs = warehouse
    wh = wh + "-sql"
    ident = "kafka.sql_s3"
    db = tmp_path / "catalog.db"
    _log(tmp_path / "logs", n=24)
    argv = ["--path", str(tmp_path / "logs"), "--warehouse", wh, "--catalog-uri",
            f"sqlite:///{db}", "--table", ident, "--no-progress", *_fs_flags(options)]
    assert run_job("export_iceberg", argv) == 0
    _, rows = java_rest.read(f"jdbc:sqlite:{db}", "kafkalog", ident, wh)
    assert rows == _expected(str(tmp_path / "logs")) and len(rows) == 48
    stored = fs.get_file_info(pafs.FileSelector(wh[len("s3://"):], recursive=True))
    assert [i for i in stored if i.path.endswith(".parquet")]

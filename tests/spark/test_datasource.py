"""The data source as Spark sees it: discovery with no register call, schema, option errors
(shared session; no data read here)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from spark_kafkalog.format.schema import SPARK_DDL, SPARK_DDL_WITH_HEADERS
from spark_kafkalog.spark.datasource import SCHEMA, SCHEMA_WITH_HEADERS, spark_schema
from tests.conftest import REPO


def test_schema_is_sparks_kafka_schema(spark):
    from pyspark.sql.types import _parse_datatype_string  # needs the JVM

    assert spark_schema(False) == _parse_datatype_string(SPARK_DDL) == SCHEMA
    assert spark_schema(True) == _parse_datatype_string(SPARK_DDL_WITH_HEADERS) == \
        SCHEMA_WITH_HEADERS


def test_arrow_schema_matches_what_spark_checks():
    from pyspark.sql.pandas.types import to_arrow_schema

    from spark_kafkalog.format import record_schema

    for headers in (False, True):
        assert to_arrow_schema(spark_schema(headers), timezone="UTC").equals(
            record_schema(headers))


def test_format_name_resolves_without_register(spark, tmp_path):
    # No spark.dataSource.register anywhere in the test suite: pyspark found the
    # pyspark_kafkalog module's DefaultSource by itself.
    df = spark.read.format("kafkalog").option("subscribe", "t").load(str(tmp_path))
    assert df.schema == SCHEMA
    df = (spark.read.format("kafkalog").option("subscribe", "t")
          .option("includeHeaders", "true").load(str(tmp_path)))
    assert df.schema == SCHEMA_WITH_HEADERS


@pytest.mark.parametrize("key,value", [
    ("failOnDataLoss", "perhaps"),
    ("kafka.bootstrap.servers", "localhost:9092"),
    ("minPartitions", "0"),
    ("noSuchOption", "1"),
])
def test_bad_option_fails_when_the_frame_is_defined(spark, tmp_path, key, value):
    with pytest.raises(Exception) as info:
        (spark.read.format("kafkalog").option("subscribe", "t").option(key, value)
         .load(str(tmp_path)))
    assert "InvalidOptionError" in str(info.value)
    assert key.lower() in str(info.value).lower()


def test_batch_only_rule_fails_at_the_first_action(spark, tmp_path):
    # schema() serves read and readStream alike: a rule of one mode waits for reader()
    df = (spark.read.format("kafkalog").option("subscribe", "t")
          .option("startingOffsets", "latest").load(str(tmp_path)))
    with pytest.raises(Exception, match="startingOffsets can't be latest for batch"):
        df.count()
    spark.readStream.format("kafkalog").option("subscribe", "t") \
        .option("startingOffsets", "latest").load(str(tmp_path))


def test_custom_schema_is_rejected(spark, tmp_path):
    df = (spark.read.format("kafkalog").schema("value binary")
          .option("subscribe", "t").load(str(tmp_path)))
    with pytest.raises(Exception, match="fixed schema"):
        df.collect()


@pytest.mark.slow
def test_fresh_session_outside_the_repo_finds_kafkalog(tmp_path):
    """A new Python process, started outside the source tree, with no PYTHONPATH: the
    installed package alone must make format("kafkalog") resolve."""
    script = textwrap.dedent(f"""
        import sys
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local[1]")
                 .config("spark.ui.enabled", "false")
                 .config("spark.driver.bindAddress", "127.0.0.1")
                 .config("spark.driver.host", "127.0.0.1").getOrCreate())
        df = spark.read.format("kafkalog").option("subscribe", "t").load({str(tmp_path)!r})
        print("COLUMNS", ",".join(df.columns))
        spark.stop()
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["SPARK_CONF_DIR"] = str(REPO / "conf")
    proc = subprocess.run([sys.executable, "-c", script], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "COLUMNS key,value,topic,partition,offset,timestamp,timestampType" in proc.stdout

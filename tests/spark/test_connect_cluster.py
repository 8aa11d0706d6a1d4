"""The same read from a Spark Connect client and under local-cluster (separate executor
JVMs and Python workers). Both are marked slow.

Spark Connect: a Connect server is started on the shared session's SparkContext
(``SparkConnectService.start``, bound to 127.0.0.1 on a free port) and a remote client
session talks to it over gRPC; the data source is resolved on the server, with no register
call. local-cluster needs its own SparkContext, so it runs in a subprocess.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

from spark_kafkalog.format import record_schema
from spark_kafkalog.log import read_table
from tests.conftest import REPO
from tests.log.logbuilder import LogDirBuilder
from tests.log.test_read import _records

pytestmark = pytest.mark.slow

TOPIC = "cc"


@pytest.fixture(scope="module")
def small_log(tmp_path_factory):
    root = tmp_path_factory.mktemp("cc-logs")
    b = LogDirBuilder(root)
    for n in range(2):
        p = b.partition(TOPIC, n, index_interval_bytes=200)
        for i, codec in enumerate(["none", "lz4", "gzip"]):
            p.append(_records(30, b"c%d-%d" % (n, i), with_headers=True), compression=codec)
            p.roll()
        p.append(_records(7, b"end%d" % n))
        p.high_watermark = p.log_end_offset
    b.write()
    return str(root)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def connect(spark):
    """A Spark Connect client session served by the shared session's SparkContext."""
    sc = spark.sparkContext
    port = free_port()
    conf = sc._jsc.sc().conf()
    conf.set("spark.connect.grpc.binding.address", "127.0.0.1")
    conf.set("spark.connect.grpc.binding.port", str(port))
    service = sc._jvm.org.apache.spark.sql.connect.service.SparkConnectService
    service.start(sc._jsc.sc())
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    remote = RemoteSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()
    try:
        yield remote
    finally:
        remote.stop()
        service.stop(getattr(service, "stop$default$1")(), getattr(service, "stop$default$2")())


def test_spark_connect_read_equals_read_table(connect, small_log):
    df = (connect.read.format("kafkalog").option("subscribe", TOPIC)
          .option("includeHeaders", "true").load(small_log))
    got = df.toArrow().cast(record_schema(True))
    assert got.equals(read_table(small_log, TOPIC))
    # pushdown through Connect
    q = df.filter("partition = 1 and offset >= 40").select("offset")
    assert [r.offset for r in q.collect()] == \
        read_table(small_log, TOPIC, partitions=[1], starting_offsets={1: 40},
                   include_headers=False).column("offset").to_pylist()


def test_spark_connect_error_names_the_option(connect, small_log):
    with pytest.raises(Exception) as info:
        (connect.read.format("kafkalog").option("subscribe", TOPIC)
         .option("startingOffsets", "tomorrow").load(small_log).collect())
    assert "startingOffsets" in str(info.value)


def test_local_cluster_separate_executors(small_log, tmp_path):
    """local-cluster[2,1,1024]: two executor JVMs with their own Python workers."""
    script = textwrap.dedent(f"""
        import json, os, sys
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local-cluster[2,1,1024]")
                 .config("spark.ui.enabled", "false")
                 .config("spark.driver.bindAddress", "127.0.0.1")
                 .config("spark.driver.host", "127.0.0.1")
                 .config("spark.sql.python.filterPushdown.enabled", "true")
                 .config("spark.executorEnv.PYTHONPATH", {str(REPO)!r})
                 # schedule only once both executors have registered
                 .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
                 .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "180s")
                 .getOrCreate())
        from pyspark.sql import functions as F
        df = (spark.read.format("kafkalog").option("subscribe", {TOPIC!r})
              .option("includeHeaders", "true").option("maxRecordsPerPartition", "20")
              .load({small_log!r}))
        # one job: the rows, and which Spark partition each came from
        t = df.withColumn("spark_partition", F.spark_partition_id()).toArrow()
        import pyarrow as pa
        with pa.OSFile({str(tmp_path / "out.arrow")!r}, "wb") as f:
            w = pa.ipc.new_file(f, t.schema); w.write_table(t); w.close()
        execs = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()
        print("RESULT", json.dumps({{"block_managers": execs}}))
        spark.stop()
    """)
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["SPARK_CONF_DIR"] = str(REPO / "conf")
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run([sys.executable, "-c", script], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")][-1]
    res = json.loads(line[len("RESULT "):])
    assert res["block_managers"] == 3                    # the driver and two executors
    with pa.memory_map(str(tmp_path / "out.arrow")) as src:
        t = pa.ipc.open_file(src).read_all()
    # maxRecordsPerPartition=20, cut at batch boundaries: each partition holds three
    # 30-record batches (each over the limit: a partition of its own) and one of 7
    assert len(set(t.column("spark_partition").to_pylist())) == 8
    got = t.drop_columns(["spark_partition"]).cast(record_schema(True))
    assert got.equals(read_table(small_log, TOPIC))

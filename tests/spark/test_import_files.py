"""jobs/import_files.py: files -> a topic. ``export_parquet`` then ``import_files
--preserve-offsets`` gives back the topic record for record (offsets, timestamps,
timestamp types, keys, values, headers) on a log built by kafka-python/aiokafka (every
codec, headers, gaps, aborted transactions, LogAppendTime) and on every real-broker
fixture; JSON and CSV with SQL expressions; bad input as one line and exit status 2."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from spark_kafkalog.jobs import export_parquet, import_files
from spark_kafkalog import jobkit
from spark_kafkalog.errors import BadRowError, unwrap
from spark_kafkalog.jobkit import JobInputError
from spark_kafkalog.log import LogDirs, read_table
from tests.conftest import REPO
from tests.log.logbuilder import build_rich_partition, rec
from tests.spark.test_write_preserve import TOPIC, ordered


def export(spark, root: str, out: str, topics: list[str]) -> None:
    args = export_parquet.parse_args(["--path", root, "--output", out, "--topic",
                                      ",".join(topics), "--include-headers",
                                      "--isolation-level", "read_uncommitted"])
    df, _ = export_parquet.observe(export_parquet.build_frame(spark, args))
    df.write.mode("overwrite").partitionBy("topic", "date").parquet(out)


def run(spark, argv: list[str]) -> dict:
    return import_files.run_import(spark, import_files.parse_args(argv))


@pytest.fixture(scope="module")
def rich(tmp_path_factory):
    root = tmp_path_factory.mktemp("rich")
    b, p = build_rich_partition(root)
    q = b.partition(TOPIC, 2, base_offset=40)
    q.append([rec(b"k%d" % i, b"v%d" % i, ts=1_700_000_000_000 + i) for i in range(6)],
             compression="snappy", offset_deltas=[0, 1, 5, 6, 7, 30])
    q.append([rec(None, b"lat%d" % i) for i in range(4)], log_append_time=1_750_000_000_000)
    q.high_watermark = q.log_end_offset
    b.write()
    return str(root), p, q


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_export_then_import_restores_the_topic(spark, tmp_path, rich, codec):
    root, p, q = rich
    out = str(tmp_path / "export")
    export(spark, root, out, [TOPIC])
    dst = str(tmp_path / "restore")
    s = run(spark, ["--input", out, "--output", dst, "--preserve-offsets",
                    "--compression-type", codec,
                    "--partitions", "3", "--summary-json", str(tmp_path / "s.json")])
    want = ordered(pa.concat_tables([p.expected_table("read_uncommitted"),
                                     q.expected_table("read_uncommitted")]))
    got = ordered(read_table(dst, TOPIC))
    assert got.equals(want.cast(got.schema))
    assert s["rows"] == want.num_rows and s["partitions"] == 2 and s["topics"] == 1
    assert s["offsets"] == "preserved" and s["input_bytes"] > 0
    assert s["first_timestamp"].endswith("Z") and s["rows_per_second"] > 0
    line = import_files.summary_line(s)
    assert line.startswith(f"imported {want.num_rows} rows into 2 topic-partitions (1 topic")
    # the same import again: every offset is below the log end now, nothing is written
    with pytest.raises(Exception) as failed:
        run(spark, ["--input", out, "--output", dst, "--preserve-offsets"])
    err = unwrap(failed.value)          # the commit's error, inside Spark's
    assert isinstance(err, BadRowError) and re.fullmatch(
        r"topic 'a\.b-c_d' partition \d: offset \d+ is below the partition's log end "
        r"offset \d+.*", str(err)), failed.value
    status, line = jobkit.exit_status(failed.value)
    assert status == 2 and line.startswith("BadRowError: topic 'a.b-c_d' partition ")
    assert ordered(read_table(dst, TOPIC)).equals(got)


def test_real_broker_fixtures_round_trip(spark, tmp_path, real_broker):
    """export_parquet then import_files --preserve-offsets, per broker log dir: each
    topic's records equal the original read, record by record (a magic-0 record's
    timestamp type -1 becomes CreateTime with its NO_TIMESTAMP kept)."""
    n = 0
    for d in sorted(x for x in real_broker.iterdir() if x.is_dir()):
        root = str(d)
        topics = [t for t in LogDirs(root, include_internal=True).topics()
                  if "invalid_crc" not in t and read_table(root, t).num_rows]
        out, dst = str(tmp_path / d.name / "export"), str(tmp_path / d.name / "restore")
        export(spark, root, out, topics)
        run(spark, ["--input", out, "--output", dst, "--preserve-offsets"])
        for t in topics:
            want = ordered(read_table(root, t))
            tt = want.column("timestampType")
            want = want.set_column(want.column_names.index("timestampType"),
                                   "timestampType",
                                   pc.max_element_wise(tt, pa.scalar(0, pa.int32())))
            got = ordered(read_table(dst, t))
            assert got.to_pylist() == want.to_pylist(), (d.name, t)
            assert got.equals(want.cast(got.schema)), (d.name, t)
            n += got.num_rows
    assert n > 50_000


def test_json_and_csv_with_expressions(spark, tmp_path):
    js = tmp_path / "in.json"
    js.write_text("\n".join(json.dumps({"id": i, "name": f"n{i}", "at": 1_700_000_000_000 + i,
                                        "p": i % 2}) for i in range(20)))
    dst = str(tmp_path / "log")
    s = run(spark, ["--input", str(js), "--input-format", "json", "--output", dst,
                    "--topic", "j", "--key", "cast(id as string)",
                    "--value", "to_json(struct(name))", "--timestamp", "at",
                    "--partition-expr", "p", "--compression-type", "lz4"])
    assert s["rows"] == 20 and s["partitions"] == 2
    t = read_table(dst, "j").sort_by([("key", "ascending")])
    assert sorted(t.column("key").to_pylist()) == sorted(str(i).encode() for i in range(20))
    row = [r for r in t.to_pylist() if r["key"] == b"7"][0]
    assert row["value"] == b'{"name":"n7"}' and row["partition"] == 1
    assert int(row["timestamp"].timestamp() * 1000) == 1_700_000_000_007
    csv = tmp_path / "in.csv"
    csv.write_text("k,v,ts\n" + "".join(f"a{i},b{i},2024-05-01T00:00:0{i}Z\n"
                                         for i in range(5)))
    # the old spellings (--format, --option, --path) still work
    run(spark, ["--input", str(csv), "--format", "csv", "--option", "header=true",
                "--path", dst, "--topic", "c", "--key", "k", "--value", "v",
                "--timestamp", "ts"])
    t = read_table(dst, "c")
    assert t.column("value").to_pylist() == [b"b%d" % i for i in range(5)]
    assert t.column("offset").to_pylist() == list(range(5))
    assert t.column("timestamp")[4].as_py().isoformat() == "2024-05-01T00:00:04+00:00"
    with pytest.raises(JobInputError, match="no 'value' column"):
        run(spark, ["--input", str(csv), "--input-format", "csv", "--output", dst,
                    "--topic", "c"])
    with pytest.raises(JobInputError, match="--value gives bigint"):
        run(spark, ["--input", str(js), "--input-format", "json", "--output", dst,
                    "--topic", "c", "--value", "id"])


def test_bad_arguments_exit_2_with_one_line(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "jobs" / "import_files.py"),
                           "--input", "x", "--output", str(tmp_path), "--topic", "a",
                           "--topic-expr", "b"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "import_files: JobInputError: give --topic or --topic-expr, not both"]

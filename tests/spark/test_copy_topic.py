"""jobs/copy_topic.py: preserved-offset copies, time windows, re-partitioning and the
offset map, checked against oracles outside the project: the log builder's own record
list (tests/log/logbuilder.py, batches encoded by kafka-python/aiokafka), kafka-python's
murmur2 for placement, the real-broker fixtures and ``kafkalog verify``."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from collections import defaultdict

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.jobs import copy_topic
from spark_kafkalog import jobkit
from spark_kafkalog.cli import main as kafkalog_main
from spark_kafkalog.log import LogDirs, read_checkpoint
from tests.conftest import REPO
from tests.log.logbuilder import LogDirBuilder, build_rich_partition, rec

COLUMNS = ["key", "value", "partition", "offset", "timestamp", "timestampType", "headers"]
BASE_TS = 1_700_000_000_000


def _read(spark, path: str, topic: str, isolation: str = "read_uncommitted") -> pa.Table:
    df = (spark.read.format("kafkalog").option("path", path).option("subscribe", topic)
          .option("includeHeaders", "true").option("kafka.isolation.level", isolation)
          .load())
    return df.toArrow().select(COLUMNS).sort_by([("partition", "ascending"),
                                                 ("offset", "ascending")])


def _rows(t: pa.Table) -> list[tuple]:
    return list(zip(*(t.column(c).to_pylist() for c in COLUMNS)))


def _copy(spark, *argv) -> dict:
    return copy_topic.run(spark, copy_topic.parse_args(list(argv)))


def _verify_clean(path) -> None:
    out, err = io.StringIO(), io.StringIO()
    status = kafkalog_main(["verify", "--strict", str(path)], stdout=out, stderr=err)
    assert status == 0, out.getvalue() + err.getvalue()


def _expected(p, isolation="read_committed") -> list[tuple]:
    return _rows(p.expected_table(isolation).select(COLUMNS))


# ---- keeping offsets ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def rich(tmp_path_factory):
    """Every codec, headers, null keys and values, compaction gaps, committed and aborted
    transactions, LogAppendTime, a log start inside the first segment."""
    root = tmp_path_factory.mktemp("rich") / "logs"
    b, p = build_rich_partition(root)
    return str(root), p


@pytest.mark.parametrize("codec", ["lz4", "zstd", "none"])
def test_preserved_copy_recompressed_and_rebatched_equals_the_source(spark, rich, tmp_path,
                                                                     codec):
    src, p = rich
    out = str(tmp_path / "out")
    summary = _copy(spark, "--path", src, "--output", out, "--topic", p.topic,
                    "--rename", f"{p.topic}=copy", "--codec", codec, "--batch-size", "200")
    expected = _expected(p)
    assert summary["rows"] == len(expected) and summary["topics"] == 1
    got = _read(spark, out, "copy")
    assert _rows(got) == expected                       # same offsets, gaps and all
    assert _rows(got) == _rows(_read(spark, src, p.topic, "read_committed"))
    assert any(r[5] == 1 for r in expected)            # LogAppendTime kept as such
    logdirs = LogDirs(out)
    (part,) = logdirs.partitions("copy")
    starts = read_checkpoint(logdirs.filesystem, f"{out}/log-start-offset-checkpoint")
    assert starts[("copy", 0)] == expected[0][3]        # the log starts at its first record
    assert len(logdirs.partitions("copy")[0].segments) >= 1
    _verify_clean(out)


def test_read_uncommitted_copy_keeps_aborted_records_as_plain_data(spark, rich, tmp_path):
    src, p = rich
    out = str(tmp_path / "out")
    _copy(spark, "--path", src, "--output", out, "--topic", p.topic,
          "--isolation-level", "read_uncommitted")
    expected = _expected(p, "read_uncommitted")
    assert len(expected) > len(_expected(p))               # aborted records are in it
    assert _rows(_read(spark, out, p.topic, "read_committed")) == expected


def test_offset_map_of_a_preserved_copy_is_the_identity(spark, rich, tmp_path):
    src, p = rich
    out, mapping = str(tmp_path / "out"), str(tmp_path / "map")
    _copy(spark, "--path", src, "--output", out, "--topic", p.topic, "--offset-map", mapping)
    m = pq.read_table(mapping)
    assert m.schema.names == list(copy_topic.MAP_COLUMNS)
    assert [str(f.type) for f in m.schema] == ["string", "int32", "int64", "string", "int32",
                                               "int64"]
    rows = sorted(zip(*(m.column(c).to_pylist() for c in copy_topic.MAP_COLUMNS)))
    assert rows == [(p.topic, 0, r[3], p.topic, 0, r[3]) for r in _expected(p)]


def test_time_window_is_exact_and_keeps_offsets(spark, tmp_path):
    b = LogDirBuilder(tmp_path / "src")
    parts = []
    for n in range(3):
        p = b.partition("clicks", n)
        for k in range(6):
            # timestamps step back now and then: a window is not an offset range
            recs = [rec(b"k%d" % (i % 5), b"v%d-%d-%d" % (n, k, i),
                        ts=BASE_TS + 1000 * (k * 10 + i) - (7000 if i % 4 == 3 else 0))
                    for i in range(10)]
            p.append(recs, compression=["none", "gzip", "zstd"][n])
        p.high_watermark = p.log_end_offset
        parts.append(p)
    b.write()
    lo, hi = BASE_TS + 13_000, BASE_TS + 41_000
    out = str(tmp_path / "out")
    summary = _copy(spark, "--path", str(tmp_path / "src"), "--output", out,
                    "--topic", "clicks", "--from", "2023-11-14T22:13:33Z", "--to", str(hi))
    assert jobkit.parse_time_ms("2023-11-14T22:13:33Z", "--from") == lo
    expected = sorted(
        (r for p in parts for r in _rows(p.expected_table().select(COLUMNS))
         if lo <= round(r[4].timestamp() * 1000) < hi), key=lambda r: (r[2], r[3]))
    got = _rows(_read(spark, out, "clicks"))
    assert got == expected and summary["rows"] == len(expected)
    offsets = [r[3] for r in got]
    assert offsets != list(range(len(offsets)))         # gaps where records fell outside
    _verify_clean(out)


def test_an_empty_window_the_preflight_could_not_decide_writes_nothing(spark, tmp_path):
    """When the preflight cannot tell whether the window holds a record (its byte budget
    ran out: ``selects=None``), the job asks Spark for one row before writing: none is
    the preflight's one-line refusal and no output dir; one is the copy."""
    b = LogDirBuilder(tmp_path / "src")
    p = b.partition("clicks", 0)
    p.append([rec(b"k", b"v%d" % i, ts=BASE_TS + 1000 * i) for i in range(10)])
    p.high_watermark = p.log_end_offset
    b.write()
    out = tmp_path / "out"
    argv = ["--path", str(tmp_path / "src"), "--output", str(out), "--topic", "clicks"]
    with pytest.raises(copy_topic.BadInput, match=r"^--to 1000: no record of clicks in the "
                                                  r"offsets selected has a timestamp in"):
        copy_topic.run(spark, copy_topic.parse_args(argv + ["--to", "1000"]), selects=None)
    assert not out.exists()
    summary = copy_topic.run(spark, copy_topic.parse_args(
        argv + ["--from", str(BASE_TS + 3000), "--to", str(BASE_TS + 5000)]), selects=None)
    assert summary["rows"] == 2
    assert [r[3] for r in _rows(_read(spark, str(out), "clicks"))] == [3, 4]


def test_partitions_and_offset_ranges_select_exactly(spark, keyed, tmp_path):
    src, truth = keyed
    rows = {n: _expected(p) for n, p in truth.items()}
    out = str(tmp_path / "a")
    _copy(spark, "--path", src, "--output", out, "--topic", "orders", "--partition", "0,2",
          "--start-offset", "100", "--end-offset", "300")
    assert _rows(_read(spark, out, "orders")) == \
        [r for n in (0, 2) for r in rows[n] if 100 <= r[3] < 300]
    out = str(tmp_path / "b")
    _copy(spark, "--path", src, "--output", out, "--topic", "orders",
          "--starting-offsets", '{"orders":{"1":250}}', "--ending-offsets",
          '{"orders":{"0":10,"1":-1}}')
    assert _rows(_read(spark, out, "orders")) == \
        [r for r in rows[0] if r[3] < 10] + [r for r in rows[1] if r[3] >= 250] + rows[2]
    _verify_clean(out)


# ---- re-partitioning ----------------------------------------------------------------------

def java_partition(key: bytes, n: int) -> int:
    """The Java client's default partitioner, by kafka-python's own murmur2."""
    from kafka.partitioner.default import murmur2
    return (murmur2(key) & 0x7FFFFFFF) % n


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    """3 partitions of keyed records (keys mostly placed by key, a few keys in several
    partitions), null and empty keys, timestamps out of order within partitions."""
    root = tmp_path_factory.mktemp("keyed") / "logs"
    b = LogDirBuilder(root)
    truth = {}
    for n in range(3):
        p = b.partition("orders", n)
        recs = []
        for i in range(400):
            if i % 17 == 0:
                key = None
            elif i % 29 == 0:
                key = b""
            elif i % 31 == 0:
                key = b"shared-%d" % (i % 3)          # the same keys in every partition
            else:
                key = b"user-%d" % ((i * 3 + n) % 90)
            ts = BASE_TS + 50 * i + (n * 7) - (400 if i % 9 == 4 else 0)
            recs.append(rec(key, b"p%d-r%d" % (n, i), ts=ts,
                            headers=[("h", b"%d" % i)] if i % 5 == 0 else []))
        for k in range(0, 400, 50):
            p.append(recs[k:k + 50], compression="lz4" if k % 100 else "none")
            if k == 200:
                p.gap(3)
        p.high_watermark = p.log_end_offset
        truth[n] = p
    b.write()
    return str(root), truth


def _check_repartitioned(src_rows: dict, new_rows: list[tuple], mapping: list[tuple],
                         n: int) -> None:
    """``src_rows``: (partition, offset) -> row; ``new_rows``: the copy's rows;
    ``mapping``: (partition, offset, new_partition, new_offset) of every record."""
    assert len(mapping) == len(src_rows) == len(new_rows)
    by_new = {(r[2], r[3]): r for r in new_rows}
    for sp, so, np_, no in mapping:
        old = src_rows[(sp, so)]
        new = by_new[(np_, no)]
        # the same record: key, value, timestamp, type, headers
        assert (new[0], new[1], new[4], new[5], new[6]) == \
               (old[0], old[1], old[4], old[5], old[6])
        want = sp % n if old[0] is None else java_partition(old[0], n)
        assert np_ == want, (old[0], np_, want)
    # new offsets are 0.. without gaps in every new partition
    per_new = defaultdict(list)
    for _sp, _so, np_, no in mapping:
        per_new[np_].append(no)
    for offs in per_new.values():
        assert sorted(offs) == list(range(len(offs)))
    # every key's records from one source partition keep their order
    seq = defaultdict(list)
    for sp, so, np_, no in sorted(mapping, key=lambda m: (m[2], m[3])):
        seq[(src_rows[(sp, so)][0], sp)].append(so)
    for offs in seq.values():
        assert offs == sorted(offs)


def test_repartitioned_frame_places_like_the_java_partitioner(spark, keyed):
    src, truth = keyed
    args = copy_topic.parse_args(["--path", src, "--output", "/nonexistent",
                                  "--topic", "orders", "--partitions", "5"])
    (plan,) = copy_topic.plan_topics(args)
    assert plan.repartition == 5 and plan.partition_count == 3
    t = copy_topic.copy_frame(spark, args, plan).toArrow()
    src_rows = {(r[2], r[3]): r for p in truth.values() for r in _expected(p)}
    new_rows = _rows(t.select(COLUMNS))
    mapping = list(zip(t.column("src_partition").to_pylist(),
                       t.column("src_offset").to_pylist(),
                       t.column("partition").to_pylist(), t.column("offset").to_pylist()))
    _check_repartitioned(src_rows, new_rows, mapping, 5)


def test_repartitioned_copy_and_its_offset_map(spark, keyed, tmp_path):
    src, truth = keyed
    out, mapping = str(tmp_path / "out"), str(tmp_path / "map")
    summary = _copy(spark, "--path", src, "--output", out, "--topic", "orders",
                    "--rename", "orders=orders5", "--partitions", "5", "--compression-type", "zstd",
                    "--offset-map", mapping)
    src_rows = {(r[2], r[3]): r for p in truth.values() for r in _expected(p)}
    assert summary["rows"] == len(src_rows) and summary["partitions"] == 5
    got = _rows(_read(spark, out, "orders5"))
    m = pq.read_table(mapping)
    assert set(m.column("topic").to_pylist()) == {"orders"}
    assert set(m.column("new_topic").to_pylist()) == {"orders5"}
    rows = list(zip(*(m.column(c).to_pylist() for c in
                      ("partition", "offset", "new_partition", "new_offset"))))
    _check_repartitioned(src_rows, got, rows, 5)
    assert [p.partition for p in LogDirs(out).partitions("orders5")] == list(range(5))
    _verify_clean(out)


# ---- real broker logs ---------------------------------------------------------------------

@pytest.mark.parametrize("logdir,topic", [("iechenyb-data", "string-key"),
                                          ("niloufar-ldi-poc", "TestTopicPatient"),
                                          ("seanorth-kafka-server", "some-topic"),
                                          ("kafka-0.10-magic1", "topic1")])
def test_real_broker_topic_copied_with_offsets_equals_its_read(spark, real_broker, tmp_path,
                                                               logdir, topic):
    src = str(real_broker / logdir)
    out = str(tmp_path / "out")
    _copy(spark, "--path", src, "--output", out, "--topic", topic, "--codec", "lz4",
          "--batch-size", "4096")
    assert _rows(_read(spark, out, topic)) == _rows(_read(spark, src, topic,
                                                          "read_committed"))
    _verify_clean(out)


def test_topic_id_kept_or_given_in_partition_metadata(spark, real_broker, tmp_path):
    src = real_broker / "seanorth-kafka-server"
    out = tmp_path / "out"
    _copy(spark, "--path", str(src), "--output", str(out), "--topic", "some-topic",
          "--keep-topic-id")
    assert (out / "some-topic-0" / "partition.metadata").read_bytes() == \
        (src / "some-topic-0" / "partition.metadata").read_bytes()
    _copy(spark, "--path", str(src), "--output", str(out), "--topic", "some-topic",
          "--rename", "some-topic=other", "--topic-id", "B3_HiNPgSQ6oxG9ZZ6ED5A",
          "--partitions", "2")
    for q in (0, 1):
        assert (out / f"other-{q}" / "partition.metadata").read_text() == \
            "version: 0\ntopic_id: B3_HiNPgSQ6oxG9ZZ6ED5A"
    assert not (out / "other-0" / "partition.metadata.tmp").exists()
    for argv, words in [(["--keep-topic-id", "--rename", "some-topic=x"], "renamed"),
                        (["--topic-id", "AAAAAAAAAAAAAAAAAAAAAA"], "reserved"),
                        (["--topic-id", "not-an-id"], "not a Kafka topic id")]:
        with pytest.raises((copy_topic.BadInput, InvalidOptionError), match=words):
            copy_topic.plan_topics(copy_topic.parse_args(
                ["--path", str(src), "--output", str(tmp_path / "o2"),
                 "--topic", "some-topic", *argv]))


# ---- bad input ----------------------------------------------------------------------------

def test_bad_input_is_one_line_and_exit_2(rich, tmp_path):
    src, p = rich
    cases = [
        (["--topic", "nope"], "nope not found"),
        (["--topic", p.topic, "--from", "yesterday"], "--from"),
        (["--topic", p.topic, "--rename", "other=x"], "--rename"),
        (["--topic", p.topic, "--rename", f"{p.topic}=bad name"], "legal Kafka topic"),
        (["--topic", p.topic, "--partition", "7"], "--partition"),
        (["--topic", p.topic, "--ending-offsets", '{"other":{"0":5}}'], "does not copy"),
        (["--topic", p.topic, "--from", "2024-01-02", "--to", "2024-01-01"], "is empty"),
    ]
    for extra, words in cases:
        proc = subprocess.run([sys.executable, str(REPO / "jobs" / "copy_topic.py"),
                               "--path", src, "--output", str(tmp_path / "o"), *extra],
                              capture_output=True, text=True, cwd=REPO, timeout=300)
        assert proc.returncode == 2, (extra, proc.stderr)
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("copy_topic")]
        assert len(lines) == 1 and words in lines[0], (extra, proc.stderr)


def test_existing_destination_topic_is_refused(rich, tmp_path):
    src, p = rich
    with pytest.raises(copy_topic.BadInput, match="already exists"):
        copy_topic.plan_topics(copy_topic.parse_args(
            ["--path", src, "--output", src, "--topic", p.topic]))


def test_job_prints_its_summary_and_writes_it_as_json(rich, tmp_path):
    src, p = rich
    out, js = tmp_path / "out", tmp_path / "summary.json"
    proc = subprocess.run([sys.executable, str(REPO / "jobs" / "copy_topic.py"),
                           "--path", src, "--output", str(out), "--topic", p.topic,
                           "--compression-type", "gzip", "--summary-json", str(js),
                           "--progress"],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = len(_expected(p))
    (line,) = proc.stdout.splitlines()
    assert line.startswith(f"copied {rows} rows from 1 partition (1 topic, ") and \
        "offsets kept" in line
    s = json.loads(js.read_text())
    # a rate only for a run it measures (1,000 rows and a second at least)
    assert ("rows/s" in line) == (rows >= 1000 and s["seconds"] >= 1), line
    assert s["rows"] == rows and s["partitions"] == 1 and s["topics"] == 1
    assert s["bytes"] == sum(f.stat().st_size for f in out.rglob("*.log"))
    ts = [t for t in (r[4].timestamp() * 1000 for r in _expected(p)) if t >= 0]
    assert s["first_timestamp"] == jobkit.iso_ms(round(min(ts)))
    assert s["last_timestamp"] == jobkit.iso_ms(round(max(ts)))
    assert s["rows_per_second"] > 0 and s["per_topic"][0]["offsets"] == "preserved"
    assert "copy_topic: [1/1]" in proc.stderr


def test_help_has_an_example_and_needs_no_spark():
    proc = subprocess.run([sys.executable, str(REPO / "jobs" / "copy_topic.py"), "--help"],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 0 and "Example" in proc.stdout and "--offset-map" in proc.stdout


def test_groups_translated_through_a_real_repartitioned_copy(spark, keyed, tmp_path):
    """End to end: copy_topic re-partitions and writes its offset map; consumer_offsets
    --translate turns each group's commits on the old log into positions on the copy.
    Checked record by record on the copy as read back: every record before a group's
    new position was consumed on the old log, the one at it was not."""
    from spark_kafkalog.jobs import consumer_offsets
    from tests.test_consumer_offsets_job import commits, read_csv, write_consumer_offsets

    src, truth = keyed
    out, mapping = str(tmp_path / "out"), str(tmp_path / "map")
    _copy(spark, "--path", src, "--output", out, "--topic", "orders",
          "--partitions", "2", "--offset-map", mapping)
    groups = {"mid": {0: 120, 1: 333, 2: 7}, "one": {1: 250}, "done": {0: 10_000,
              1: 10_000, 2: 10_000}, "fresh": {0: 0, 1: 0, 2: 0}}
    old = tmp_path / "old"
    write_consumer_offsets(old, [pair for g, offs in groups.items()
                                 for pair in commits(g, offs)])
    csvs = tmp_path / "csv"
    assert consumer_offsets.main(["--path", str(old), "--translate", mapping,
                                  "--output", str(csvs), "--no-progress"]) == 0
    m = pq.read_table(mapping)
    where = {(q, o): (p, so) for p, so, q, o in zip(
        *(m.column(c).to_pylist() for c in ("partition", "offset", "new_partition",
                                             "new_offset")))}
    copied = _read(spark, out, "orders")
    per_new = defaultdict(list)
    for q, o in zip(copied.column("partition").to_pylist(),
                    copied.column("offset").to_pylist()):
        per_new[q].append(o)
    for g, committed in groups.items():
        positions = read_csv(csvs / f"{g}.csv")
        assert set(positions) == {("orders", 0), ("orders", 1)}, g
        for (_t, q), pos in positions.items():
            offs = sorted(per_new[q])
            consumed = [where[(q, o)][0] in committed
                        and where[(q, o)][1] < committed[where[(q, o)][0]] for o in offs]
            assert all(c for o, c in zip(offs, consumed) if o < pos), (g, q, pos)
            if pos <= offs[-1]:
                assert pos in offs and not consumed[offs.index(pos)], (g, q, pos)
            else:
                assert pos == offs[-1] + 1 and all(consumed), (g, q, pos)

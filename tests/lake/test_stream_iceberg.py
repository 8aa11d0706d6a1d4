"""Streaming into Iceberg: ``readStream.format("kafkalog")`` -> ``writeStream.format(
"kafkalog_iceberg")`` with availableNow triggers (no sleeps). Records appended between two
runs of the query land once; a crash between the Iceberg commit and Spark's commit-log
write (the checkpoint's last commit file deleted: Spark re-runs that micro-batch with the
same id) adds nothing twice; a second query that would write offsets the table holds is
refused. The table is read back by Apache Iceberg's Java library (the implementation the
sink does not use) and compared with ``spark.read.format("kafkalog")`` of the same
offsets, and with ``log.read_table``."""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from spark_kafkalog.lake import NEXT_OFFSETS_KEY, OFFSETS_KEY, RUN_ID_KEY, open_catalog
from spark_kafkalog.spark.iceberg_sink import (
    BATCH_ID_KEY,
    QUERY_ID_KEY,
    IcebergCommitMessage,
    IcebergSink,
    SinkConfig,
    stream_starting_offsets,
)
from tests.lake.oracle import JavaReader, metadata_location, row_tuples
from tests.lake.test_export_iceberg import IDENT, _expected, _grow, _log



@pytest.fixture(scope="module")
def java(tmp_path_factory):
    return JavaReader(tmp_path_factory.mktemp("iceberg-reader"))


def _run(spark, logs: str, wh: Path, ck: Path, *, starting="earliest", max_per_trigger=None,
         query_id=None):
    """One availableNow run of the query to its end; the StreamingQuery."""
    reader = (spark.readStream.format("kafkalog").option("path", logs)
              .option("subscribe", "t").option("includeHeaders", "true")
              .option("startingOffsets", starting))
    if max_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_per_trigger))
    writer = (reader.load().writeStream.format("kafkalog_iceberg")
              .option("table", IDENT).option("warehouse", str(wh))
              .option("checkpointLocation", str(ck)).trigger(availableNow=True))
    if query_id is not None:
        writer = writer.option("queryId", query_id)
    query = writer.start()
    try:
        query.awaitTermination()
    finally:
        query.stop()
    return query


def _table(wh: Path):
    return open_catalog(str(wh)).load_table(IDENT)


def _ours(wh: Path) -> list:
    """Summaries of the table's snapshots, oldest first."""
    return [s.summary for s in _table(wh).snapshots()]


def _spark_rows(spark, logs: str, ends: dict):
    """``spark.read.format("kafkalog")`` of every offset below ``ends`` ({partition: next})."""
    df = (spark.read.format("kafkalog").option("path", logs).option("subscribe", "t")
          .option("includeHeaders", "true").option("startingOffsets", "earliest")
          .option("endingOffsets", json.dumps({"t": {str(q): n for q, n in ends.items()}}))
          .load())
    return row_tuples(df.toArrow())


def _forget_commit(ck: Path, batch: int) -> None:
    """Delete Spark's commit-log entry of ``batch`` (and Hadoop's checksum beside it): the
    state a crash between our Iceberg commit and Spark's commit-log write leaves."""
    entry = ck / "commits" / str(batch)
    assert entry.exists(), sorted(p.name for p in (ck / "commits").iterdir())
    entry.unlink()
    (ck / "commits" / f".{batch}.crc").unlink(missing_ok=True)


def _files_on_disk_are_the_tables(wh: Path) -> None:
    listed = {t.file.file_path for t in _table(wh).scan().plan_files()}
    on_disk = {f"file://{p}" for p in wh.rglob("*.parquet")}
    assert on_disk == listed


@pytest.mark.slow
def test_two_runs_land_every_record_once_and_java_reads_what_spark_reads(
        spark, tmp_path, java):
    b = _log(tmp_path / "logs")
    logs, wh, ck = b.uris(), tmp_path / "wh", tmp_path / "ck"
    first = _run(spark, logs, wh, ck, max_per_trigger=70)
    assert row_tuples(_table(wh).scan().to_arrow()) == _expected(logs)
    summaries = _ours(wh)
    assert len(summaries) >= 2          # 160 offsets, 70 per trigger: several micro-batches
    assert [int(s[BATCH_ID_KEY]) for s in summaries] == list(range(len(summaries)))
    assert {s[QUERY_ID_KEY] for s in summaries} == {str(first.id)}
    assert json.loads(summaries[-1][NEXT_OFFSETS_KEY]) == {"t": {"0": 80, "1": 80}}
    covered = {}
    for s in summaries:
        assert s[RUN_ID_KEY]
        for q, (lo, hi) in json.loads(s[OFFSETS_KEY])["t"].items():
            assert covered.get(q, 0) == lo, "offset ranges of successive batches meet"
            covered[q] = hi
    assert covered == {"0": 80, "1": 80}

    _grow(b, 37, b"new")
    second = _run(spark, logs, wh, ck)
    assert second.id == first.id            # the same query, continued from its checkpoint
    expected = _expected(logs)
    assert len(expected) == 234
    assert row_tuples(_table(wh).scan().to_arrow()) == expected
    last = _ours(wh)[-1]
    assert json.loads(last[OFFSETS_KEY]) == {"t": {"0": [80, 117], "1": [80, 117]}}
    _, rows = java.read(metadata_location(wh, IDENT))
    assert rows == _spark_rows(spark, logs, {0: 117, 1: 117}) == expected
    _files_on_disk_are_the_tables(wh)
    assert stream_starting_offsets(_table(wh)) == '{"t":{"0":117,"1":117}}'


@pytest.mark.slow
def test_batch_replayed_after_a_crash_past_the_iceberg_commit_is_not_appended_twice(
        spark, tmp_path, java):
    """The checkpoint's last commit file deleted: Spark has the batch's offsets but no
    record that it finished, as after a crash right after our Iceberg commit. The next run
    re-runs that batch (same id, same offsets): nothing is appended twice, its files are
    deleted, and the records added meanwhile land once."""
    b = _log(tmp_path / "logs")
    logs, wh, ck = b.uris(), tmp_path / "wh", tmp_path / "ck"
    _run(spark, logs, wh, ck, max_per_trigger=70)
    before = _ours(wh)
    last_batch = int(before[-1][BATCH_ID_KEY])
    _forget_commit(ck, last_batch)
    _grow(b, 11, b"late")
    _run(spark, logs, wh, ck, max_per_trigger=70)
    after = _ours(wh)
    assert after[:len(before)] == before
    # the replayed batch committed nothing; the new records came in later batches
    assert [int(s[BATCH_ID_KEY]) for s in after[len(before):]] and \
        all(int(s[BATCH_ID_KEY]) > last_batch for s in after[len(before):])
    expected = _expected(logs)
    assert row_tuples(_table(wh).scan().to_arrow()) == expected
    _, rows = java.read(metadata_location(wh, IDENT))
    assert rows == expected
    _files_on_disk_are_the_tables(wh)


@pytest.mark.slow     # ~35 s (two queries); the fast tier replays a commit by direct calls
def test_replay_with_nothing_new_leaves_the_table_as_it_was(spark, tmp_path):
    b = _log(tmp_path / "logs", n=20)
    logs, wh, ck = b.uris(), tmp_path / "wh", tmp_path / "ck"
    _run(spark, logs, wh, ck)
    before = _ours(wh)
    _forget_commit(ck, int(before[-1][BATCH_ID_KEY]))
    _run(spark, logs, wh, ck)
    assert _ours(wh) == before
    assert row_tuples(_table(wh).scan().to_arrow()) == _expected(logs)
    _files_on_disk_are_the_tables(wh)


def test_second_query_over_the_same_offsets_is_refused(spark, tmp_path):
    """A new checkpoint starting at earliest on a table that holds those offsets: the
    batch is refused (the table never holds an offset twice); started at the table's own
    offsets (:func:`stream_starting_offsets`) it continues it."""
    from pyspark.errors import StreamingQueryException

    b = _log(tmp_path / "logs", n=20)
    logs, wh = b.uris(), tmp_path / "wh"
    _run(spark, logs, wh, tmp_path / "ck1")
    before = _ours(wh)
    with pytest.raises(StreamingQueryException, match="already holds offsets up to 20"):
        _run(spark, logs, wh, tmp_path / "ck2")
    assert _ours(wh) == before
    _files_on_disk_are_the_tables(wh)
    _grow(b, 5, b"more")
    _run(spark, logs, wh, tmp_path / "ck3", starting=stream_starting_offsets(_table(wh)))
    assert row_tuples(_table(wh).scan().to_arrow()) == _expected(logs)


def test_commit_message_and_writer_pickle(tmp_path):
    from pyspark.sql.types import StructType

    from spark_kafkalog.spark.datasource import SCHEMA_WITH_HEADERS

    sink = IcebergSink({"table": IDENT, "warehouse": str(tmp_path / "wh"),
                        "checkpointLocation": str(tmp_path / "ck")})
    writer = sink.streamWriter(SCHEMA_WITH_HEADERS, False)
    clone = pickle.loads(pickle.dumps(writer))
    assert clone.config == writer.config and clone.metadata == writer.metadata
    msg = IcebergCommitMessage(files=[], offsets={("t", 0): (3, 9)}, rows=7)
    assert pickle.loads(pickle.dumps(msg)) == msg
    with pytest.raises(Exception, match="no column 'offset'"):
        sink.streamWriter(StructType(SCHEMA_WITH_HEADERS.fields[:4]), False)


def test_bad_options_are_named():
    from spark_kafkalog.errors import InvalidOptionError

    with pytest.raises(InvalidOptionError, match="option table"):
        SinkConfig.parse({"warehouse": "wh", "queryId": "q"})
    with pytest.raises(InvalidOptionError, match="option bogus"):
        SinkConfig.parse({"table": "a.b", "warehouse": "wh", "bogus": "1", "queryId": "q"})
    with pytest.raises(InvalidOptionError, match="windowRecords"):
        SinkConfig.parse({"table": "a.b", "warehouse": "wh", "windowRecords": "0",
                          "queryId": "q"})


def _direct_writer(tmp_path, query_id="q-1"):
    """The sink's writer as Spark's workers get it (options in, pickled), no Spark."""
    from spark_kafkalog.spark.datasource import SCHEMA_WITH_HEADERS

    sink = IcebergSink({"table": IDENT, "warehouse": str(tmp_path / "wh"),
                        "queryId": query_id})
    return pickle.loads(pickle.dumps(sink.streamWriter(SCHEMA_WITH_HEADERS, False)))


def _task(writer, table, lo, hi):
    """One task's commit message over rows ``[lo, hi)`` of ``table`` (pickled, as Spark
    ships it to the driver)."""
    batches = table.slice(lo, hi - lo).to_batches(max_chunksize=7)
    return pickle.loads(pickle.dumps(writer.write(iter(batches))))


def test_failed_attempts_files_stay_orphans_and_a_replayed_commit_adds_nothing(tmp_path):
    """Without Spark: tasks' ``write`` and the driver's ``commit`` called directly. A task
    attempt that failed (its message never reached the driver) leaves its files in the
    table's data directory, in no snapshot; the commit of the successful attempts holds
    exactly their rows; the same batch committed again (Spark's replay) adds nothing and
    deletes the replay's files; ``abort`` deletes the reported files."""
    from spark_kafkalog.log import read_table

    logs = _log(tmp_path / "logs", n=30).uris()
    rows = read_table(logs, "t", include_headers=True).sort_by([("partition", "ascending"),
                                                                 ("offset", "ascending")])
    assert rows.num_rows == 60
    writer = _direct_writer(tmp_path)
    orphan = _task(writer, rows, 0, 30)             # the attempt that "failed"
    done = [_task(writer, rows, 0, 30), _task(writer, rows, 30, 60)]
    writer.commit(done, 0)
    wh = tmp_path / "wh"
    assert row_tuples(_table(wh).scan().to_arrow()) == row_tuples(rows)
    listed = {t.file.file_path for t in _table(wh).scan().plan_files()}
    orphans = {f.file_path for f in orphan.files}
    on_disk = {f"file://{p}" for p in wh.rglob("*.parquet")}
    assert orphans and not orphans & listed and on_disk == listed | orphans
    (summary,) = _ours(wh)
    assert summary[QUERY_ID_KEY] == "q-1" and summary[BATCH_ID_KEY] == "0"
    assert json.loads(summary[OFFSETS_KEY]) == {"t": {"0": [0, 30], "1": [0, 30]}}

    replay = [_task(writer, rows, 0, 60)]
    writer.commit(replay, 0)
    assert len(_ours(wh)) == 1
    assert not {f.file_path for f in replay[0].files} & \
        {f"file://{p}" for p in wh.rglob("*.parquet")}

    # another query (its own id) over the same offsets: refused, files deleted
    other = _direct_writer(tmp_path, query_id="q-2")
    late = [_task(other, rows, 0, 60)]
    with pytest.raises(Exception, match="already holds offsets up to 30"):
        other.commit(late, 0)
    assert len(_ours(wh)) == 1
    aborted = [_task(writer, rows, 0, 10), None]
    writer.abort(aborted, 1)
    assert not {f.file_path for f in aborted[0].files} & \
        {f"file://{p}" for p in wh.rglob("*.parquet")}


def test_the_batch_job_continues_a_table_the_sink_wrote_and_back(tmp_path):
    """Both writers keep the same summary keys: the job starts where the stream's last
    commit ends, and a stream started at the table's offsets continues after the job."""
    from spark_kafkalog.log import read_table
    from tests.lake.test_export_iceberg import _export

    b = _log(tmp_path / "logs", n=30)
    logs, wh = b.uris(), tmp_path / "wh"
    writer = _direct_writer(tmp_path)
    writer.commit([_task(writer, read_table(logs, "t", include_headers=True), 0, 60)], 0)
    _grow(b, 7, b"job")
    assert _export(logs, wh).rows == 14
    _grow(b, 5, b"stream")
    start = json.loads(stream_starting_offsets(_table(wh)))
    assert start == {"t": {"0": 37, "1": 37}}
    tail = read_table(logs, "t", include_headers=True, starting_offsets={0: 37, 1: 37})
    writer.commit([_task(writer, tail, 0, tail.num_rows)], 1)
    assert row_tuples(_table(wh).scan().to_arrow()) == _expected(logs)
    assert len(_expected(logs)) == 84


def test_a_missing_checkpoint_is_refused_at_start(tmp_path):
    from spark_kafkalog.errors import InvalidOptionError

    with pytest.raises(InvalidOptionError, match="option checkpointLocation"):
        SinkConfig.parse({"table": IDENT, "warehouse": "wh"})
    assert not (tmp_path / "wh").exists()


def test_a_spec_changed_under_the_query_is_refused_and_its_files_deleted(tmp_path):
    """Files written for the table's spec at the query's start are not committed into a
    table whose spec changed meanwhile (they would carry the wrong partition values)."""
    from pyiceberg.transforms import IdentityTransform

    from spark_kafkalog.errors import TableError
    from spark_kafkalog.log import read_table

    logs = _log(tmp_path / "logs", n=10).uris()
    writer = _direct_writer(tmp_path)
    msg = _task(writer, read_table(logs, "t", include_headers=True), 0, 20)
    with _table(tmp_path / "wh").update_spec() as update:
        update.add_field("partition", IdentityTransform(), "kafka_partition")
    with pytest.raises(TableError, match="partition spec or schema changed"):
        writer.commit([msg], 0)
    assert not list((tmp_path / "wh").rglob("*.parquet"))
    assert _ours(tmp_path / "wh") == []


def test_an_upsert_table_is_refused_at_start(tmp_path):
    """The sink appends history; a table export_iceberg made with --mode upsert holds one
    row per key, and appending would give a key a second row: refused before any task."""
    from spark_kafkalog.errors import TableError
    from spark_kafkalog.lake.iceberg_table import RawRecords, open_table

    open_table(open_catalog(str(tmp_path / "wh")), IDENT, RawRecords("upsert"),
               partition_by="day")
    with pytest.raises(TableError, match="--mode upsert .*--mode append needs a table"):
        _direct_writer(tmp_path)

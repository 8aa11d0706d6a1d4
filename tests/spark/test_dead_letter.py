"""Dead letters through Spark (issue 38 item 5): ``deadLetterPath`` on a typed read and
``export_parquet --dead-letter``. The log's good values are fastavro-encoded and their
rows compared with fastavro's resolution; the bad ones are the records this test
corrupted, known by offset, and must come back raw and whole (key, value, headers)."""
from __future__ import annotations

import contextlib

import pyarrow.parquet as pq
import pytest

from spark_kafkalog import jobkit
from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.jobs import export_parquet, run_job
from spark_kafkalog.log.read.dead_letter import parse_dead_letter_name
from spark_kafkalog.spark.options import parse_read_options
from tests.log.logbuilder import LogDirBuilder, rec
from tests.typed import typed_logs as tl

GOOD = tl.framed(2, {"id": 1, "amount": 5, "note": "x", "tags": ["t"]})
#: offset -> (key, value, headers) of partition 0; 1, 3, 4, 6 are bad (value or key)
P0 = [(tl.framed(3, "a"), GOOD, [("h", b"1")]),
      (tl.framed(3, "b"), b"\x07not avro", [("trace", b"\x00\xff")]),
      (tl.framed(3, "c"), tl.framed(1, {"id": 2, "amount": 3}), []),
      (tl.framed(3, "d"), b"\x00" + (99).to_bytes(4, "big") + b"\x02", []),
      (b"\x01raw key", GOOD, [("x", b"")]),                   # the key does not decode
      (None, tl.framed(2, {"id": 7, "amount": 1, "note": None, "tags": []}), []),
      (tl.framed(3, "g"), GOOD[:-3], [])]
P1 = [(None, tl.framed(1, {"id": i, "amount": i}), []) for i in range(4)]
BAD = {(0, 1), (0, 3), (0, 4), (0, 6)}


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    b = LogDirBuilder(tmp_path_factory.mktemp("dl") / "logs")
    b.partition("_schemas", 0).append([rec(k, v, ts=500) for k, v in tl.registry_records()])
    for q, rows in ((0, P0), (1, P1)):
        b.partition("dl", q).append([rec(k, v, ts=1000 + i, headers=h)
                                     for i, (k, v, h) in enumerate(rows)])
    for _, p in b.parts:
        p.high_watermark = p.log_end_offset
    b.write()
    return str(b.roots[0])


def _read(spark, logs, **options):
    r = spark.read.format("kafkalog").option("path", logs).option("subscribe", "dl") \
        .option("valueFormat", "avro").option("valueSubject", "orders-value") \
        .option("keyFormat", "avro").option("keySubject", "orders-key")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _expected_bad():
    rows = []
    for q, o in sorted(BAD):
        k, v, h = (P0 if q == 0 else P1)[o]
        rows.append((q, o, k, v, [(a, b) for a, b in h] or None))
    return rows


def _letters(directory):
    t = pq.read_table(str(directory))
    return sorted(zip(t.column("partition").to_pylist(), t.column("offset").to_pylist(),
                      t.column("key").to_pylist(), t.column("value").to_pylist(),
                      [None if h is None else [(x["key"], x["value"]) for x in h] or None
                       for h in t.column("headers").to_pylist()])), t


def test_dead_letter_option_needs_null_or_skip(tmp_path):
    logs, dead = str(tmp_path / "logs"), str(tmp_path / "dead")
    base = {"path": logs, "subscribe": "t", "valueFormat": "avro", "deadLetterPath": dead}
    with pytest.raises(InvalidOptionError, match="deadLetterPath: needs onDecodeError"):
        parse_read_options(base)
    assert parse_read_options({**base, "onDecodeError": "skip"}).typed.dead_letter == dead
    with pytest.raises(InvalidOptionError, match="deadLetterPath: applies to typed"):
        parse_read_options({"path": logs, "subscribe": "t", "deadLetterPath": dead})


def test_skip_writes_every_bad_record_raw_and_whole(spark, logs, tmp_path):
    dead = tmp_path / "dead"
    # three slices per partition at most: several tasks, a file per range with bad rows
    df = _read(spark, logs, onDecodeError="skip", deadLetterPath=str(dead),
               maxRecordsPerPartition="3")
    rows = df.orderBy("partition", "offset").collect()
    assert "headers" not in df.columns
    good = [(q, o) for q, rs in ((0, P0), (1, P1)) for o in range(len(rs))
            if (q, o) not in BAD]
    assert [(r["partition"], r["offset"]) for r in rows] == good
    for r in rows:
        k, v, _ = (P0 if r["partition"] == 0 else P1)[r["offset"]]
        assert r["value"].asDict(recursive=True) == tl.resolve(v)
        assert r["key"] == (None if k is None else tl.resolve(k, tl.KEY))
    got, table = _letters(dead)
    assert got == _expected_bad()
    by_offset = {o: r for o, r in zip(table.column("offset").to_pylist(), table.to_pylist())}
    assert by_offset[1]["value_schema_id"] is None and by_offset[1]["value_error_position"] == 0
    assert by_offset[3]["value_schema_id"] == 99 and "unknown schema id 99" in \
        by_offset[3]["value_error"]
    assert by_offset[4]["value_error"] is None and by_offset[4]["key_error"]
    assert by_offset[6]["value_schema_id"] == 2 and by_offset[6]["key_error"] is None
    names = sorted(parse_dead_letter_name(p.name) for p in dead.iterdir())
    # each file is named by its task's offset range and holds only that range's records
    for t, q, start, end in names:
        part = pq.read_table(str(dead / f"{t}-{q}-{start:020d}-{end:020d}.parquet"))
        assert all(start <= o < end for o in part.column("offset").to_pylist())
    assert {q for _, q, _, _ in names} == {0}
    # the same read again replaces its files: the records are there once
    _read(spark, logs, onDecodeError="skip", deadLetterPath=str(dead),
          maxRecordsPerPartition="3").count()
    assert _letters(dead)[0] == _expected_bad()
    assert sorted(parse_dead_letter_name(p.name) for p in dead.iterdir()) == names


def test_null_mode_dead_letters_the_rows_it_reports(spark, logs, tmp_path):
    dead = tmp_path / "dead"
    df = _read(spark, logs, onDecodeError="null", deadLetterPath=str(dead),
               includeHeaders="true")
    reported = df.where("value_error IS NOT NULL OR key_error IS NOT NULL") \
        .select("partition", "offset").collect()
    assert sorted((r[0], r[1]) for r in reported) == sorted(BAD)
    assert "headers" in df.columns
    assert _letters(dead)[0] == _expected_bad()


@pytest.fixture
def shared_session(spark, monkeypatch):
    @contextlib.contextmanager
    def session(*_a, **_k):
        yield spark
    monkeypatch.setattr(jobkit, "spark_session", session)
    return spark


def test_export_parquet_dead_letter(logs, tmp_path, shared_session, capsys):
    out, dead = tmp_path / "out", tmp_path / "dead"
    argv = ["--path", logs, "--topic", "dl", "--output", str(out), "--value-format", "avro",
            "--option", "valueSubject=orders-value", "--on-decode-error", "skip",
            "--dead-letter", str(dead), "--no-progress"]
    for run in range(2):             # a re-run replaces the dead letter: never twice
        assert export_parquet.main(argv) == 0
        line = capsys.readouterr().out.strip().splitlines()[-1]
        assert line.endswith(f"; 3 records that did not decode (skipped) written raw to "
                             f"{dead}"), line
        t = pq.read_table(str(out))
        assert sorted(zip(t.column("partition").to_pylist(), t.column("offset").to_pylist())) \
            == sorted((q, o) for q, rs in ((0, P0), (1, P1)) for o in range(len(rs))
                      if (q, o) not in {(0, 1), (0, 3), (0, 6)})
        assert "value_error" not in t.column_names
        # only the value is typed here: the bad key at offset 4 is not a decode error
        assert [(q, o) for q, o, *_ in _letters(dead)[0]] == [(0, 1), (0, 3), (0, 6)]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["dead", "out"]


def test_export_parquet_refuses_dead_letter_with_fail_before_spark(logs, tmp_path, capsys,
                                                                   monkeypatch):
    def no_spark(*_a, **_k):
        raise AssertionError("Spark started")
    monkeypatch.setattr(jobkit, "spark_session", no_spark)
    for extra, said in (([], "--dead-letter needs --on-decode-error skip or null"),
                        (["--on-decode-error", "fail"], "--dead-letter needs"),
                        (["--on-decode-error", "skip", "--value-format", "binary"],
                         "--dead-letter: applies to typed columns")):
        flags = ["--value-format", "avro"] if "--value-format" not in extra else []
        code = run_job("export_parquet", ["--path", logs, "--output", str(tmp_path / "o"),
                                          "--dead-letter", str(tmp_path / "d"),
                                          *flags, *extra])
        err = capsys.readouterr().err
        assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err


def test_each_task_counts_and_warns_once_per_partition(logs, tmp_path, caplog):
    """Reader protocol called directly (no session): decode errors are counted per
    partition and warned once per partition by the task that met them, with the count and
    the first reason (pyspark's Python data source API has no task metrics to add to)."""
    import logging

    import pyarrow as pa

    from spark_kafkalog.spark.datasource import KafkaLogDataSource

    ds = KafkaLogDataSource({"path": logs, "subscribe": "dl", "valueFormat": "avro",
                             "valueSubject": "orders-value", "onDecodeError": "skip",
                             "packPartitions": "false"})
    reader = ds.reader(ds.schema())
    parts = reader.partitions()
    assert sorted(p.partition for p in parts) == [0, 1]
    with caplog.at_level(logging.WARNING, logger="spark_kafkalog.typed.columns"):
        rows = {p.partition: pa.Table.from_batches(list(reader.read(p))).num_rows
                for p in parts}
    assert rows == {0: 4, 1: 4}
    warned = [r.getMessage() for r in caplog.records if "do not decode" in r.getMessage()]
    assert len(warned) == 1, warned
    assert warned[0].startswith("3 record(s) of dl-0 do not decode and were skipped")
    assert "at offset 1" in warned[0] and "magic byte 7" in warned[0]


def test_stream_writes_the_dead_letter_of_each_micro_batch(spark, logs, tmp_path):
    dead = tmp_path / "dead"
    _stream(spark, logs, dead, tmp_path, "4")
    assert _letters(dead)[0] == _expected_bad()
    # several micro-batches: a file per micro-batch range with a bad record, holding
    # only that range's
    names = [parse_dead_letter_name(p.name) for p in dead.iterdir()]
    assert len(names) >= 2
    for t, q, start, end in names:
        part = pq.read_table(str(dead / f"{t}-{q}-{start:020d}-{end:020d}.parquet"))
        assert all(start <= o < end for o in part.column("offset").to_pylist())
    assert spark.read.parquet(str(tmp_path / "sink")).count() == 11 - len(BAD)


def _stream(spark, logs, dead, tmp_path, per_trigger):
    r = spark.readStream.format("kafkalog").option("path", logs).option("subscribe", "dl") \
        .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", per_trigger) \
        .option("valueFormat", "avro").option("valueSubject", "orders-value") \
        .option("keyFormat", "avro").option("keySubject", "orders-key") \
        .option("onDecodeError", "skip").option("deadLetterPath", str(dead))
    q = r.load().writeStream.format("parquet").option("path", str(tmp_path / "sink")) \
        .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start()
    q.awaitTermination()
    return q

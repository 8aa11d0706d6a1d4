"""Dead-letter records (issue 38 item 5) without Spark: each decoder's schema id and byte
position per bad row, the dead-letter rows of a library read (the raw bytes are the ones
tests/typed/typed_logs.py corrupted, by offset), and the files: published whole under a
name of their offset range, nothing visible from a writer that never committed."""
from __future__ import annotations

import json
import struct

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from spark_kafkalog.log import read_table
from spark_kafkalog.log.read.dead_letter import (
    DeadLetterFile,
    DeadLetterSink,
    count_dead_letters,
    dead_letter_files,
    dead_letter_name,
    open_dead_letter_dir,
    parse_dead_letter_name,
)
from spark_kafkalog.typed.avro import AvroDecoder
from spark_kafkalog.typed.columns import DecodeErrorCounts, typed_batches
from spark_kafkalog.typed.dead_letter import DEAD_LETTER_SCHEMA
from spark_kafkalog.typed.jsonschema import JsonSchemaDecoder
from spark_kafkalog.typed.protobuf import ProtobufDecoder
from tests.typed import typed_logs as tl


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    return str(tl.build(tmp_path_factory.mktemp("dl") / "logs"))


def _framed(sid: int, body: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", sid) + body


def test_avro_decoder_gives_schema_id_and_position_per_bad_row():
    good = tl.framed(2, {"id": 1, "amount": 5, "note": "x", "tags": ["t"]})
    values = pa.array([good, b"\x07x", _framed(99, b"\x02"), good[:-3], None], pa.binary())
    r = AvroDecoder(tl.text(tl.V2), {2: tl.text(tl.V2)}).decode(values, on_error="null")
    assert r.errors.is_null().to_pylist() == [True, False, False, False, True]
    assert r.schema_ids.to_pylist() == [None, None, 99, 2, None]
    pos = r.positions.to_pylist()
    assert pos[0] is None and pos[1] == 0 and pos[4] is None
    # the truncated value: decoding stopped inside its body, at most at its end
    assert 5 <= pos[3] <= len(good) - 3


def test_json_and_protobuf_decoders_give_schema_ids():
    schema = json.dumps({"type": "object", "properties": {"id": {"type": "integer"}}})
    values = pa.array([_framed(1, b'{"id": 1}'), _framed(7, b'{"id": 2}'), b"{}",
                       _framed(1, b'{"id": ')], pa.binary())
    r = JsonSchemaDecoder(schema, {1: schema}).decode(values, on_error="skip")
    assert r.kept.to_pylist() == [True, False, False, False]
    assert r.schema_ids.to_pylist() == [None, 7, None, 1]
    assert r.positions.null_count == 4          # JSON: no byte position known
    proto = 'syntax = "proto3"; message M { int64 id = 1; }'
    # magic, id, message-index array [0] (one zero byte), then field 1 varint 5
    values = pa.array([_framed(3, b"\x00\x08\x05"), _framed(4, b"\x00\x08\x05"),
                       _framed(3, b"\x00\x08")], pa.binary())
    r = ProtobufDecoder(proto, {3: proto}).decode(values, on_error="null")
    assert r.errors.is_null().to_pylist() == [True, False, False]
    assert r.schema_ids.to_pylist() == [None, 4, 3]
    assert r.positions.to_pylist()[2] is not None


def test_library_read_hands_every_bad_record_raw_and_whole(logs):
    raw = read_table(logs, "orders_bad", include_headers=True)
    read = _plan(logs)
    dead: list[pa.RecordBatch] = []
    counts = DecodeErrorCounts("skip")
    kept = pa.Table.from_batches(list(typed_batches(raw.to_batches(), read, counts=counts,
                                                    dead_letter=dead.append,
                                                    drop_headers=True)))
    assert "headers" not in kept.column_names and kept.column("offset").to_pylist() == [0, 4]
    letters = pa.Table.from_batches(dead, schema=DEAD_LETTER_SCHEMA)
    recs = tl.bad_records()
    # the bad rows are the ones typed_logs corrupted: offsets 1 (no magic byte), 2
    # (unknown id 99), 3 (truncated), their bytes exactly as written
    assert letters.column("offset").to_pylist() == [1, 2, 3] == [
        o for o, (_, v) in enumerate(recs) if o in (1, 2, 3)]
    assert letters.column("value").to_pylist() == [recs[o][1] for o in (1, 2, 3)]
    assert letters.column("value_schema_id").to_pylist() == [None, 99, 2]
    assert all(letters.column("value_error").to_pylist())
    assert letters.column("key_error").null_count == 3
    assert letters.num_rows == counts.total == 3


def _plan(logs):
    from spark_kafkalog.log.read.typed_plan import open_schema_source, plan_typed_read
    from spark_kafkalog.log import LogDirs
    from spark_kafkalog.typed.request import make_column

    logdirs = LogDirs(logs, include_internal=True)
    col = make_column("value", "avro", subject="orders-value")
    return plan_typed_read(open_schema_source(logdirs), ["orders_bad"], [col], "skip")


def _rows(n: int, topic="t", partition=0, first=0) -> pa.RecordBatch:
    cols = {f.name: pa.nulls(n, f.type) for f in DEAD_LETTER_SCHEMA}
    cols["topic"] = pa.array([topic] * n)
    cols["partition"] = pa.array([partition] * n, pa.int32())
    cols["offset"] = pa.array(range(first, first + n), pa.int64())
    cols["value"] = pa.array([b"v%d" % i for i in range(n)], pa.binary())
    return pa.RecordBatch.from_arrays(list(cols.values()), schema=DEAD_LETTER_SCHEMA)


def test_file_published_whole_or_not_at_all(tmp_path):
    fs = pafs.LocalFileSystem()
    d = str(tmp_path)
    f = DeadLetterFile(fs, d, dead_letter_name("my-topic.x", 3, 10, 20))
    f.write(_rows(2, first=10))
    # a writer killed now leaves a hidden temporary only: no reader sees a file
    assert dead_letter_files(fs, d) == [] and len(list(tmp_path.iterdir())) == 1
    assert f.commit() == 2
    assert [p.rsplit("/", 1)[1] for p in dead_letter_files(fs, d)] == [
        "my-topic.x-3-00000000000000000010-00000000000000000020.parquet"]
    assert parse_dead_letter_name("my-topic.x-3-00000000000000000010-00000000000000000020"
                                  ".parquet") == ("my-topic.x", 3, 10, 20)
    assert [p.name for p in tmp_path.iterdir()] == [dead_letter_name("my-topic.x", 3, 10, 20)]
    aborted = DeadLetterFile(fs, d, dead_letter_name("t", 0, 0, 5))
    aborted.write(_rows(1))
    aborted.abort()
    assert len(list(tmp_path.iterdir())) == 1
    # the same range written again replaces its file: never twice
    again = DeadLetterFile(fs, d, dead_letter_name("my-topic.x", 3, 10, 20))
    again.write(_rows(2, first=10))
    again.commit()
    assert count_dead_letters(fs, d) == 2


def test_sink_routes_rows_to_the_range_that_holds_them(tmp_path):
    fs = pafs.LocalFileSystem()
    sink = DeadLetterSink(fs, str(tmp_path), [("t", 0, 0, 3), ("t", 0, 3, 8), ("u", 1, 0, 9)])
    sink(_rows(5))                                # offsets 0..4 of t-0
    sink(_rows(2, topic="u", partition=1, first=4))
    assert sink.commit() == 7
    got = {parse_dead_letter_name(p.rsplit("/", 1)[1]): pq.read_table(p, filesystem=fs)
           .column("offset").to_pylist() for p in dead_letter_files(fs, str(tmp_path))}
    assert got == {("t", 0, 0, 3): [0, 1, 2], ("t", 0, 3, 8): [3, 4], ("u", 1, 0, 9): [4, 5]}
    with pytest.raises(ValueError, match="none of the task's ranges"):
        DeadLetterSink(fs, str(tmp_path), [("t", 0, 0, 3)])(_rows(1, first=3))


def test_export_parquet_publishes_only_whole_files_and_checks_the_count(tmp_path):
    """export_parquet's last step (no Spark): a killed task attempt's temporary file in
    the run's dead letter is dropped, the files are moved into DIR (--mode append); a
    count other than the read's is an InternalError and DIR is left alone."""
    import argparse

    from spark_kafkalog.errors import InternalError
    from spark_kafkalog.jobs import _replace, export_parquet

    fs, files = pafs.LocalFileSystem(), _replace.LocalFiles()
    dead = tmp_path / "dead"
    args = argparse.Namespace(dead_letter=str(dead), mode="append", on_decode_error="null")

    def staged_run(run_id):
        staged = _replace.sibling(str(dead), _replace.NEW, run_id)
        open_dead_letter_dir(staged)                   # as each task does
        f = DeadLetterFile(fs, staged, dead_letter_name("t", 0, 0, 9))
        f.write(_rows(2))
        f.commit()
        killed = DeadLetterFile(fs, staged, dead_letter_name("t", 1, 0, 9))
        killed.write(_rows(1, partition=1))            # never committed: the task died
        return staged

    staged = staged_run("a1")
    with pytest.raises(InternalError, match="counted 3 records .* but 2 were written"):
        export_parquet._dead_letter_publish(files, args, staged, "a1", 3)
    assert not dead.exists() and not (tmp_path / ".dead.kafkalog-new-a1").exists()
    staged = staged_run("b2")
    summary = export_parquet._dead_letter_publish(files, args, staged, "b2", 2)
    assert summary == {"path": str(dead), "records": 2, "on_decode_error": "null"}
    assert [p.name for p in dead.iterdir()] == [dead_letter_name("t", 0, 0, 9)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dead"]

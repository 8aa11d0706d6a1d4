"""``read_table(..., dead_letter_path=)``: the library read writes the records that do not
decode as the Spark read's ``deadLetterPath`` does (one Parquet file per partition offset
range read that holds any, named by that range, replaced when the range is read again).
The bad records are the ones tests/typed/typed_logs.py corrupted, by offset and bytes."""
from __future__ import annotations

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.log import read_table
from spark_kafkalog.log.read.dead_letter import dead_letter_files, dead_letter_name
from spark_kafkalog.log.read.scan import ReadStats
from spark_kafkalog.typed.columns import DecodeErrorCounts
from spark_kafkalog.typed.dead_letter import DEAD_LETTER_SCHEMA
from tests.typed import typed_logs as tl


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    return str(tl.build(tmp_path_factory.mktemp("rtdl") / "logs"))


def _read(logs, dead, **kw):
    return read_table(logs, "orders_bad", value_format="avro", value_subject="orders-value",
                      dead_letter_path=str(dead), **kw)


@pytest.mark.parametrize("policy", ["skip", "null"])
def test_bad_records_land_in_one_file_of_the_range_read(logs, tmp_path, policy):
    dead = tmp_path / "dead"
    counts, stats = DecodeErrorCounts(policy), ReadStats()
    table = _read(logs, dead, on_decode_error=policy, include_headers=False,
                  decode_errors=counts, stats=stats)
    assert "headers" not in table.column_names
    kept = table.column("offset").to_pylist()
    assert kept == ([0, 4] if policy == "skip" else [0, 1, 2, 3, 4])
    recs = tl.bad_records()
    files = dead_letter_files(pafs.LocalFileSystem(), str(dead))
    # the read covered offsets [0, 5) of partition 0: one file named by that range
    assert [f.rsplit("/", 1)[-1] for f in files] == [dead_letter_name("orders_bad", 0, 0, 5)]
    letters = pq.read_table(files[0])
    assert letters.schema == DEAD_LETTER_SCHEMA
    assert letters.column("offset").to_pylist() == [1, 2, 3]
    assert letters.column("value").to_pylist() == [recs[o][1] for o in (1, 2, 3)]
    assert letters.column("value_schema_id").to_pylist() == [None, 99, 2]
    assert all(letters.column("value_error").to_pylist())
    assert counts.total == 3 and stats.records == len(recs)
    assert stats.ranges == [("orders_bad", 0, 0, 5)]


def test_reading_the_range_again_replaces_its_file_and_a_clean_range_writes_none(logs,
                                                                                tmp_path):
    dead = tmp_path / "dead"
    _read(logs, dead, on_decode_error="skip")
    _read(logs, dead, on_decode_error="skip")
    fs = pafs.LocalFileSystem()
    assert len(dead_letter_files(fs, str(dead))) == 1
    assert pq.read_table(dead_letter_files(fs, str(dead))[0]).num_rows == 3
    # offsets [4, 5) hold only a good record: no file for that range
    _read(logs, dead, on_decode_error="skip", starting_offsets={0: 4})
    assert len(dead_letter_files(fs, str(dead))) == 1
    # [1, 3): its own file, the two bad records in it
    _read(logs, dead, on_decode_error="skip", starting_offsets={0: 1}, ending_offsets={0: 3})
    files = dead_letter_files(fs, str(dead))
    assert [f.rsplit("/", 1)[-1] for f in files] == [
        dead_letter_name("orders_bad", 0, 0, 5), dead_letter_name("orders_bad", 0, 1, 3)]
    assert pq.read_table(files[1]).column("offset").to_pylist() == [1, 2]


@pytest.mark.parametrize("kw, match", [
    (dict(on_decode_error="fail"), "dead_letter_path: needs on_decode_error"),
    (dict(on_decode_error="skip", dead_letter_path=" "), "dead_letter_path: expected"),
])
def test_refused_keywords(logs, tmp_path, kw, match):
    args = dict(value_format="avro", value_subject="orders-value",
                dead_letter_path=str(tmp_path / "d"))
    args.update(kw)
    with pytest.raises(InvalidOptionError, match=match):
        read_table(logs, "orders_bad", **args)


def test_untyped_read_refuses_a_dead_letter_path(logs, tmp_path):
    with pytest.raises(InvalidOptionError, match="dead_letter_path: applies to typed"):
        read_table(logs, "orders_bad", dead_letter_path=str(tmp_path / "d"))

"""``asOfCommit`` / ``asOfTimestamp`` through ``spark.read.format("kafkalog")``."""
from __future__ import annotations

import pytest

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.log import list_commits
from spark_kafkalog.spark.options import parse_read_options
from tests.log.test_snapshot import PLAN, build


def test_as_of_options_parse():
    o = parse_read_options({"path": "/x", "subscribe": "t", "asOfCommit": " batch:w1 "})
    assert o.as_of_commit == "batch:w1" and o.as_of_timestamp is None
    o = parse_read_options({"path": "/x", "subscribe": "t", "asOfTimestamp": "1700"})
    assert o.as_of_timestamp == 1700 and o.as_of_commit is None
    with pytest.raises(InvalidOptionError, match="give only one"):
        parse_read_options({"path": "/x", "subscribe": "t", "asOfCommit": "1",
                            "asOfTimestamp": "1"})
    with pytest.raises(InvalidOptionError, match="asOfTimestamp must be an integer"):
        parse_read_options({"path": "/x", "subscribe": "t", "asOfTimestamp": "soon"})
    with pytest.raises(InvalidOptionError, match="not valid in streaming"):
        parse_read_options({"path": "/x", "subscribe": "t", "asOfCommit": "1"},
                           streaming=True)


def test_spark_reads_as_of_each_commit(spark, tmp_path):
    root = str(tmp_path)
    expected = build(root)
    commits = list_commits(root, "t")
    for k, want in enumerate(expected):
        key = str(k) if k % 2 else commits[k].write_id
        rows = (spark.read.format("kafkalog").option("path", root).option("subscribe", "t")
                .option("asOfCommit", key).load().select("partition", "value").collect())
        got = {p: sorted(bytes(r.value) for r in rows if r.partition == p) for p in range(3)}
        assert got == {p: sorted(v) for p, v in want.items()}, k
    ts = commits[len(PLAN) - 1].committed_ms
    n = (spark.read.format("kafkalog").option("path", root).option("subscribe", "t")
         .option("asOfTimestamp", str(ts)).load().count())
    assert n == sum(len(v) for v in expected[-1].values())

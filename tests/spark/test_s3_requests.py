"""Requests on an object store grow with what is read, not with what exists.

A counting proxy (tests/log/s3count.py) stands between the S3 client and the loopback
moto server and records every HTTP request. Planning a bounded offset range, one topic
among many, one assigned partition among many, a stream reader's polls and ``kafkalog
inspect --topic`` are each counted over logs that differ only in what is NOT read (more
segments before and after the range, more partitions or topics beside it): the counts
must be equal. Reading itself costs a bounded number of requests per segment read.
"""
from __future__ import annotations

import io
import json
import logging
import threading

import pyarrow.fs as pafs
import pytest
from pyspark.sql.datasource import ReadAllAvailable

from spark_kafkalog.cli import main
from spark_kafkalog.log import LogDirs, read_table
from spark_kafkalog.spark.datasource import KafkaLogDataSource
from spark_kafkalog.spark.filters import NONE, Pushdown
from spark_kafkalog.spark.options import parse_read_options
from spark_kafkalog.spark.planning import plan
from tests.log.logbuilder import LogDirBuilder, sample_records
from tests.log.s3count import CountingProxy
from tests.log.test_s3 import s3, s3_endpoint, upload  # noqa: F401  (session moto)

BIG = "big"


@pytest.fixture
def counted(s3, s3_endpoint):  # noqa: F811
    """``(proxy, fs options through it, direct S3FileSystem, bucket)``."""
    options, fs, bucket = s3
    logging.getLogger("werkzeug").setLevel(logging.WARNING)     # one line per request
    proxy = CountingProxy(s3_endpoint)
    through = dict(options, **{"s3.endpoint": proxy.endpoint})
    yield proxy, through, fs, bucket
    proxy.close()


def _build(tmp_path, fs, bucket, name, *, segments: int, others: int = 0,
           other_topics: int = 0, snapshot: bool = False, hw: bool = True) -> str:
    """Topic ``big``: ``segments`` rolled segments of 20 records (two batches each) and
    an active one of 5; topic ``other``: ``others`` one-segment partitions;
    ``other_topics`` more one-partition topics (``hw``: checkpoint big-0's high
    watermark at its end). Uploaded under ``name``."""
    b = LogDirBuilder(tmp_path / name)
    p = b.partition(BIG, 0, index_interval_bytes=200)
    for s in range(segments):
        p.append(sample_records(10, b"a%d" % s))
        p.append(sample_records(10, b"b%d" % s))
        p.roll()
    p.append(sample_records(5, b"tail"))
    p.high_watermark = p.log_end_offset if hw else None
    for q in range(others):
        b.partition("other", q).append(sample_records(3, b"o"))
    for t in range(other_topics):
        b.partition(f"topic{t}", 0).append(sample_records(3, b"t"))
    roots = b.write()
    if snapshot:        # what a broker writes at every roll
        p.write_snapshot(roots[0], p.segments[-1][0])
    return upload(fs, roots[0], bucket, name)


def _planned(proxy, uri, through, pushdown=NONE, **options) -> tuple[int, list]:
    what = {} if "assign" in options or "subscribe" in options else {"subscribe": BIG}
    opts = parse_read_options({"path": uri, **what,
                               **{f"fs.{k}": v for k, v in through.items()}, **options})
    proxy.reset()
    slices = plan(LogDirs(uri, through), opts, pushdown)
    return proxy.count(), slices


RANGE = {"startingOffsets": json.dumps({BIG: {"0": 60}}),
         "endingOffsets": json.dumps({BIG: {"0": 75}})}


def test_planning_requests_do_not_grow_with_what_is_not_read(tmp_path, counted):
    proxy, through, fs, bucket = counted
    small = _build(tmp_path, fs, bucket, "small", segments=5, others=1, snapshot=True)
    large = _build(tmp_path, fs, bucket, "large", segments=40, others=30, other_topics=20,
                   snapshot=True)
    for options in ({}, RANGE, dict(RANGE, **{"kafka.isolation.level": "read_committed"})):
        n_small, s_small = _planned(proxy, small, through, **options)
        n_large, s_large = _planned(proxy, large, through, **options)
        assert n_large == n_small, (options, proxy.requests)
        assert n_small <= 16, (options, n_small)
        if options:
            assert [(s.start_offset, s.end_offset) for s in s_large] == [(60, 75)]
    # one assigned partition of a topic of 30: as costly as the topic's only partition
    n_one, _ = _planned(proxy, small, through, assign=json.dumps({"other": [0]}))
    n_many, slices = _planned(proxy, large, through, assign=json.dumps({"other": [7]}))
    assert [(s.topic, s.partition) for s in slices] == [("other", 7)]
    assert n_many == n_one
    # a pushed `partition = 7` filter: likewise
    n_pushed, slices = _planned(proxy, large, through, Pushdown(partitions=frozenset({7})),
                                subscribe="other")
    assert [(s.topic, s.partition) for s in slices] == [("other", 7)]
    assert n_pushed == n_one


def test_reading_costs_a_few_requests_per_segment_read(tmp_path, counted):
    proxy, through, fs, bucket = counted
    uris = {n: _build(tmp_path, fs, bucket, f"r{n}", segments=n) for n in (5, 25)}
    costs = {}
    for n, uri in uris.items():
        proxy.reset()
        t = read_table(uri, BIG, filesystem_options=through)
        assert t.num_rows == 20 * n + 5
        costs[n] = proxy.count()
    # two requests (HEAD + ranged GET) per segment read, nothing per segment otherwise
    assert costs[25] - costs[5] == 2 * 20
    proxy.reset()
    t = read_table(uris[25], BIG, filesystem_options=through,
                   starting_offsets={0: 60}, ending_offsets={0: 75})
    assert t.column("offset").to_pylist() == list(range(60, 75))
    assert proxy.count() <= costs[5] - 2 * 5 + 4


def _reader(uri, through):
    opts = {"path": uri, "subscribe": BIG, "startingOffsets": "earliest",
            **{f"fs.{k}": v for k, v in through.items()}}
    return KafkaLogDataSource(opts).streamReader(None)


def test_stream_polls_grow_with_partitions_read(tmp_path, counted):
    """An idle poll costs one listing of the root, one journal look-up per topic read
    and one listing per partition read; a changed partition adds only its own reads. A
    segment the writer adds on the object store is seen (a directory there has no stamp)."""
    proxy, through, fs, bucket = counted
    small = _build(tmp_path, fs, bucket, "s-small", segments=2, hw=False)
    large = _build(tmp_path, fs, bucket, "s-large", segments=30, others=30,
                   other_topics=10, hw=False)
    idle = {}
    for name, uri in (("small", small), ("large", large)):
        r = _reader(uri, through)
        start = r.initialOffset()
        end = r.latestOffset(start, ReadAllAvailable())
        proxy.reset()
        assert r.latestOffset(end, ReadAllAvailable()) is end
        idle[name] = proxy.count()
    assert idle["small"] == idle["large"] == 3
    # the writer adds a segment to big-0: the next poll sees it, at its own cost only
    b = LogDirBuilder(tmp_path / "grow")
    p = b.partition(BIG, 0, base_offset=end[BIG]["0"])
    p.append(sample_records(7, b"new"))
    p.write(tmp_path / "grow")
    pafs.copy_files(str(tmp_path / "grow" / f"{BIG}-0"), f"{bucket}/s-large/{BIG}-0",
                    source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
    proxy.reset()
    moved = r.latestOffset(end, ReadAllAvailable())
    assert moved[BIG]["0"] == end[BIG]["0"] + 7
    assert proxy.count() <= idle["large"] + 4


def test_inspect_one_topic_lists_only_that_topic(tmp_path, counted):
    proxy, through, fs, bucket = counted
    flags = [x for k, v in through.items() for x in ("--fs-option", f"{k}={v}")]
    counts = {}
    for name, others in (("i-small", 0), ("i-large", 40)):
        uri = _build(tmp_path, fs, bucket, name, segments=3, others=others)
        proxy.reset()
        out, err = io.StringIO(), io.StringIO()
        assert main(["inspect", "--json", *flags, "--topic", BIG, uri],
                    stdout=out, stderr=err) == 0, err.getvalue()
        [s] = json.loads(out.getvalue())["partitions"]
        assert s["log_end_offset"] == 65
        counts[name] = proxy.count()
    assert counts["i-large"] == counts["i-small"]


def test_remote_planning_is_concurrent_and_fails_as_sequential_planning(tmp_path, counted,
                                                                      monkeypatch):
    """On S3 the partitions are planned on several threads: the plan is the one local disk
    gives, and an error is the first failing partition's, as when planned one by one."""
    import spark_kafkalog.log.io.parallel as parallel
    from spark_kafkalog.errors import OffsetOutOfRangeError

    proxy, through, fs, bucket = counted
    uri = _build(tmp_path, fs, bucket, "conc", segments=3, others=12)
    local = str(tmp_path / "conc")
    threads = set()
    real = parallel.ThreadPoolExecutor.submit

    def submit(self, fn, *args, **kwargs):
        return real(self, lambda *a, **k: threads.add(threading.get_ident()) or fn(*a, **k),
                    *args, **kwargs)

    monkeypatch.setattr(parallel.ThreadPoolExecutor, "submit", submit)

    def plan_of(path, **options):
        fs_opts = {f"fs.{k}": v for k, v in through.items()} if path == uri else {}
        opts = parse_read_options({"path": path, "subscribe": "other", "maxPartitionBytes": "1k",
                                   "packPartitions": "false", **fs_opts, **options})
        return [(s.topic, s.partition, s.start_offset, s.end_offset, s.start_position)
                for s in plan(LogDirs(path, through if path == uri else None), opts)]

    assert plan_of(uri) == plan_of(local) and len(plan_of(local)) == 12
    assert len(threads) > 1
    bad = {"other": {str(q): (99 if q in (4, 9) else -2) for q in range(12)}}
    for path in (local, uri):
        with pytest.raises(OffsetOutOfRangeError, match="offset 99 of other-4 is past"):
            plan_of(path, startingOffsets=json.dumps(bad))

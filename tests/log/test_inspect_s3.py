"""``kafkalog inspect`` on an object store: its requests, counted by a proxy in front of
the loopback S3 server (:mod:`tests.log.s3count`), grow with what it inspects (the
partitions selected and their segments), not with what lies beside them; and the
partitions, inspected concurrently there, come out as they do from local disk.
"""
from __future__ import annotations

import io
import json
import logging
import threading

import pytest

from spark_kafkalog.cli import main

from .logbuilder import LogDirBuilder, sample_records
from .s3count import CountingProxy
from .test_s3 import s3, s3_endpoint, upload  # noqa: F401  (session moto)


@pytest.fixture
def counted(s3, s3_endpoint):  # noqa: F811
    """``(proxy, --fs-option flags through it, direct S3FileSystem, bucket)``."""
    options, fs, bucket = s3
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    proxy = CountingProxy(s3_endpoint)
    through = dict(options, **{"s3.endpoint": proxy.endpoint})
    flags = [x for k, v in through.items() for x in ("--fs-option", f"{k}={v}")]
    yield proxy, flags, fs, bucket
    proxy.close()


def _build(tmp_path, name, *, partitions: int, segments: int, big_segments: int = 1):
    """Topic ``t``: ``partitions`` partitions of ``segments`` segments (two batches each,
    the high watermark checkpointed); topic ``big``: one partition of
    ``big_segments``. Returns the local log dir."""
    b = LogDirBuilder(tmp_path / name)
    for q in range(partitions):
        p = b.partition("t", q, index_interval_bytes=100)
        for s in range(segments):
            if s:
                p.roll()
            p.append(sample_records(4, b"a%d" % s))
            p.append(sample_records(3, b"b%d" % s))
        p.high_watermark = p.log_end_offset
    big = b.partition("big", 0, index_interval_bytes=100)
    for s in range(big_segments):
        if s:
            big.roll()
        big.append(sample_records(5, b"big"))
    return b.write()[0]


def _inspect(proxy, flags, *args) -> tuple[int, list[dict]]:
    out, err = io.StringIO(), io.StringIO()
    proxy.reset()
    assert main(["inspect", "--json", *flags, *map(str, args)], stdout=out,
                stderr=err) == 0, err.getvalue()
    return proxy.count(), json.loads(out.getvalue())["partitions"]


def _without_paths(summaries: list[dict]) -> list[dict]:
    drop = {"root", "path", "index_path", "timeindex_path", "txnindex_path"}

    def clean(d):
        if isinstance(d, dict):
            return {k: clean(v) for k, v in d.items() if k not in drop}
        if isinstance(d, list):
            return [clean(v) for v in d]
        return d
    return clean(summaries)


@pytest.mark.parametrize("scan", [True, False], ids=["scan", "no-scan"])
def test_inspect_requests_grow_with_what_is_inspected(tmp_path, counted, scan):
    proxy, flags, fs, bucket = counted
    opts = [] if scan else ["--no-scan"]
    uris = {}
    for name, parts, segs, big in (("p4", 4, 2, 1), ("p8", 8, 2, 1), ("p8s5", 8, 5, 1),
                                   ("p8big", 8, 2, 40)):
        uris[name] = upload(fs, _build(tmp_path, name, partitions=parts, segments=segs,
                                       big_segments=big), bucket, name)
    n = {name: _inspect(proxy, flags, *opts, "--topic", "t", uri)
         for name, uri in uris.items()}
    for name, (_, summaries) in n.items():
        assert [s["partition"] for s in summaries] == list(range(len(summaries)))
        assert all(s["segment_count"] == (5 if name == "p8s5" else 2) for s in summaries)
    count = {name: c for name, (c, _) in n.items()}
    # the same requests for every partition (HEAD + GET of the files it reads: 23 with
    # a scan of two segments, 19 without; 29 and 25 before the partition's state reused
    # the time indexes and the tail inspect had read)
    per_partition = (count["p8"] - count["p4"]) / 4
    assert per_partition == int(per_partition) and 0 < per_partition <= (23 if scan else 19), \
        count
    # and for every segment (its .index, .timeindex, .log: 8 with a scan, 6 without; the
    # time index is not read again for the partition's state)
    per_segment = (count["p8s5"] - count["p8"]) / (8 * 3)
    assert per_segment == int(per_segment) and 0 < per_segment <= (8 if scan else 6), count
    # nothing for the segments of a topic not inspected
    assert count["p8big"] == count["p8"], count
    # one partition, named by its directory: as costly among 8 as among 4
    one4, [s4] = _inspect(proxy, flags, *opts, f"{uris['p4']}/t-2")
    one8, [s8] = _inspect(proxy, flags, *opts, f"{uris['p8']}/t-2")
    assert (s4["partition"], s4["log_end_offset"]) == (s8["partition"], 14)
    assert one4 == one8 < count["p4"]


def test_remote_inspect_is_concurrent_and_like_local(tmp_path, counted, monkeypatch):
    """On S3 the partitions are inspected on several threads; the output is the one local
    disk gives, and the same requests are made on every run."""
    import spark_kafkalog.log.io.parallel as parallel

    proxy, flags, fs, bucket = counted
    local = _build(tmp_path, "conc", partitions=12, segments=3)
    uri = upload(fs, local, bucket, "conc")
    threads = set()
    real = parallel.ThreadPoolExecutor.submit

    def submit(self, fn, *args, **kwargs):
        return real(self, lambda *a, **k: threads.add(threading.get_ident()) or fn(*a, **k),
                    *args, **kwargs)

    monkeypatch.setattr(parallel.ThreadPoolExecutor, "submit", submit)
    first, remote = _inspect(proxy, flags, "--topic", "t", uri)
    assert len(threads) > 1
    again, _ = _inspect(proxy, flags, "--topic", "t", uri)
    assert again == first
    _, on_disk = _inspect(proxy, [], "--topic", "t", local)
    assert _without_paths(remote) == _without_paths(on_disk)
    assert [s["partition"] for s in remote] == list(range(12))
    assert {s["log_end_offset"] for s in remote} == {21}

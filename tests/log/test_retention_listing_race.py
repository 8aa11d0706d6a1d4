"""A reader's listing racing retention, the steps interleaved by hand (no timing).

A local listing names a partition dir's files first (``os.scandir``) and stats each
``.log`` afterwards. Retention (checkpoint first, then the segments renamed to
``.deleted``, purged later) can rename a listed ``.log`` in between. Kafka's rule: those
records were deleted, not lost, so the read succeeds and is a whole suffix of the log;
it never reports a gap and never skips offsets still in the log. The same listing with
a segment truly missing (no retention) stays data loss.
"""
from __future__ import annotations

import os

import pyarrow.compute as pc
import pytest

from spark_kafkalog.errors import DataLossError
from spark_kafkalog.log import LogDirs, read_table
from spark_kafkalog.log.maintain.retention import (
    RetentionConfig,
    apply_retention,
    purge_deleted,
)
from spark_kafkalog.log.read import discovery
from tests.log.test_retention import PARTS, build_log, live_records, segment_facts


def _after_listing(monkeypatch, partition_dir: str, step) -> list[int]:
    """Run ``step`` once, right after the next listing of ``partition_dir`` named its
    files and before any of them is looked at. Returns a list that grows by one at each
    later listing of it outside ``step``."""
    real = discovery._dir_files
    listings, stepping = [], []

    def listing(fs, path, infos):
        files = real(fs, path, infos)
        if path.rstrip("/") == partition_dir and not stepping:
            if not listings:
                stepping.append(True)
                step()
                stepping.clear()
            listings.append(len(files))
        return files

    monkeypatch.setattr(discovery, "_dir_files", listing)
    return listings


def _retain(root: str, keep_bytes: int, purge: bool) -> None:
    delay = 0 if purge else 60_000
    apply_retention(LogDirs(root), "t", RetentionConfig(
        retention_ms=-1, retention_bytes=keep_bytes, file_delete_delay_ms=delay))
    if purge:
        purge_deleted(LogDirs(root), "t", delay_ms=0)


def _values(root: str, partitions=None) -> dict[int, list[bytes]]:
    t = read_table(root, "t", partitions=partitions, include_headers=False)
    return {p: t.filter(pc.equal(t["partition"], p))["value"].to_pylist()
            for p in range(PARTS)}


def _first_offset(root: str, p: int) -> int:
    t = read_table(root, "t", partitions=[p], include_headers=False)
    return t["offset"][0].as_py()


@pytest.mark.parametrize("purge", [False, True], ids=["renamed", "purged"])
def test_segment_renamed_between_listing_and_stat(tmp_path, monkeypatch, purge):
    """The flake's interleaving: the reader took its snapshot (log start 0) and listed
    t-1 (``00000000000000000000.log`` among the names); retention then advanced the log
    start and renamed (and maybe purged) the first segments; only then did the listing
    stat the ``.log``. Listed as 0 bytes it held no batch: a gap, DataLossError. The
    read must be the suffix from the first kept segment."""
    root = str(tmp_path / "logs")
    build_log(root, commits=10)
    full = live_records(root)[1]
    d = f"{root}/t-1"
    segs = segment_facts(d)
    assert len(segs) >= 4 and segs[0][0] == 0
    keep = sum(s[1] for s in segs) // 2     # retention.bytes: the first segments go
    listings = _after_listing(monkeypatch, d, lambda: _retain(root, keep, purge))
    got = _values(root, [1])[1]
    assert len(listings) >= 2           # the vanished .log made the reader list again
    kept = segment_facts(d)
    assert kept[0][0] > 0 and not os.path.exists(f"{d}/{0:020d}.log")
    # exactly the kept segments' records: a whole suffix, no offset still there skipped
    assert 0 < len(got) < len(full) and got == full[len(full) - len(got):]
    assert got == live_records(root)[1]
    monkeypatch.undo()
    assert _first_offset(root, 1) == kept[0][0]


def test_segments_purged_between_plan_and_read(tmp_path, monkeypatch):
    """The reader planned every partition (snapshot and listing, log start 0); retention
    then deleted the first segments and their renamed files were purged before the read
    opened them. The read takes the topic again at a new snapshot: each partition is the
    suffix from its first kept segment, never a LogLayoutError nor a loss."""
    from spark_kafkalog.log.read import reader

    root = str(tmp_path / "logs")
    build_log(root, commits=10)
    full = live_records(root)
    keep = min(sum(s[1] for s in segment_facts(f"{root}/t-{p}")) for p in range(PARTS)) // 2
    real, calls = reader.read_partition, []

    def read_partition(logdirs, p, **kw):
        calls.append(p.partition)
        if len(calls) == 1:
            assert p.segments[0].base_offset == 0       # planned before retention
            _retain(root, keep, purge=True)
        return real(logdirs, p, **kw)

    monkeypatch.setattr(reader, "read_partition", read_partition)
    got = _values(root)
    assert len(calls) > PARTS           # read again after the first attempt failed
    for p in range(PARTS):
        first = segment_facts(f"{root}/t-{p}")[0][0]
        assert first > 0
        n = len(got[p])
        assert 0 < n < len(full[p]) and got[p] == full[p][len(full[p]) - n:]
    monkeypatch.undo()
    assert got == live_records(root)


def test_a_segment_missing_without_retention_is_still_loss(tmp_path):
    """Control: the first segment's .log removed by hand (no log start checkpoint moved)
    and listed so: a gap to the next segment, data loss, loudly."""
    root = str(tmp_path / "logs")
    build_log(root, commits=10)
    d = f"{root}/t-1"
    segs = segment_facts(d)
    os.remove(f"{d}/{segs[1][0]:020d}.log")
    with pytest.raises(DataLossError, match="missing"):
        read_table(root, "t", include_headers=False)

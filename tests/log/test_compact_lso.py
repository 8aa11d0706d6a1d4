"""Compaction stops at the last stable offset, as Kafka's cleaner does.

Kafka's rules, restated here from its source (not from ours):

- ``LogCleanerManager.cleanableOffsets``: the first uncleanable offset is the smallest of
  the log's last stable offset, the active segment's base offset (and the
  min.compaction.lag segment); whole segments below it are cleaned;
- ``UnifiedLog.lastStableOffset``: the first unstable offset when it is below the high
  watermark, else the high watermark;
- ``ProducerStateManager.firstUnstableOffset``: the first offset of the earliest
  transaction that is undecided, or decided by a marker that is not below the high
  watermark (``removeUnreplicatedTransactions`` forgets a completed transaction only
  once its marker's offset is below the high watermark).

So a transaction whose COMMIT/ABORT marker lies at or above the checkpointed high
watermark bounds cleaning at its first offset: its records are neither cleaned as
committed nor removed as aborted.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from spark_kafkalog.log.maintain import CompactSettings, compact_topic
from tests.log.logbuilder import LogDirBuilder, rec
from tests.log.test_compact import T0, check_clean, read_all


def kafka_first_uncleanable(segment_bases: list[int], txns: list[tuple], hw: int) -> int:
    """Kafka's first uncleanable offset: ``txns`` are (first offset, marker offset or
    None) of every transaction, from the builder's ground truth."""
    unstable = [first for first, marker in txns if marker is None or marker >= hw]
    lso = min(unstable) if unstable and min(unstable) < hw else hw
    return min(lso, segment_bases[-1])


def kafka_cleaned_to(segment_bases: list[int], limit: int) -> int | None:
    """The end of the whole segments below ``limit`` (None: no segment is cleanable)."""
    ends = [nxt for nxt in segment_bases[1:] if nxt <= limit]
    return max(ends) if ends else None


def _log(root: Path, commit: bool):
    """Four segments: duplicate keys in each; a transaction of producer 101 starting in
    the second segment and decided by a marker in the third; the fourth is active."""
    b = LogDirBuilder(root)
    p = b.partition("t", 0)
    for i in range(4):
        p.append([rec(b"k", b"v%d" % i, ts=T0 + i)])
    p.roll()
    p.append([rec(b"k", b"seg1", ts=T0 + 10)])
    txn = p.begin_txn(101)
    p.append([rec(b"k", b"in-txn", ts=T0 + 11), rec(b"j", b"in-txn", ts=T0 + 11)], txn=txn)
    p.append([rec(b"k", b"after-txn-start", ts=T0 + 12)])
    p.roll()
    p.append([rec(b"j", b"seg2", ts=T0 + 20)])
    p.end_txn(txn, commit=commit)
    p.append([rec(b"j", b"seg2-b", ts=T0 + 21)])
    p.roll()
    p.append([rec(b"k", b"active", ts=T0 + 30)])
    return b, p, txn


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
@pytest.mark.parametrize("hw_at", ["below-marker", "at-marker", "past-marker", "log-end"])
def test_cleaning_stops_at_the_last_stable_offset(tmp_path, commit, hw_at):
    b, p, txn = _log(tmp_path, commit)
    hw = {"below-marker": txn.marker_offset - 1, "at-marker": txn.marker_offset,
          "past-marker": txn.marker_offset + 1, "log-end": p.log_end_offset}[hw_at]
    p.high_watermark = hw
    b.write()
    bases = [base for base, _ in p.segments]
    want_to = kafka_cleaned_to(bases, kafka_first_uncleanable(
        bases, [(t.first_offset, t.marker_offset) for t in p.txns], hw))
    before = read_all(tmp_path, "t")
    [r] = compact_topic(str(tmp_path), "t", CompactSettings(force=True), now_ms=T0)
    assert (None if r.skipped else r.cleaned_to) == want_to, r.skipped
    after = read_all(tmp_path, "t")
    # nothing at or above the cleaned offset changed: the transaction's records are
    # all still there when its marker is not below the high watermark
    assert [x for x in after if x[0] >= want_to] == [x for x in before if x[0] >= want_to]
    if hw <= txn.marker_offset:
        assert want_to <= txn.first_offset
        txn_rows = [x for x in before if x[2] == b"in-txn"]
        assert len(txn_rows) == 2 and all(x in after for x in txn_rows)
    else:
        # a replicated decision: the transaction's segment is cleaned like Kafka's cleaner
        assert want_to > txn.first_offset
        in_txn = [x for x in after if x[2] == b"in-txn"]
        assert in_txn == ([] if not commit else [x for x in in_txn if x[1] == b"j"])
    check_clean(tmp_path)

"""A reader facing a compaction's swap in flight: when it takes its listing as it is,
and when it lists again (read/snapshot.py ``listing_settled``).

The compaction is killed at a chosen step (its journal then says "committed, swapping"
until a recovery runs). Listings are made torn -- as one taken while a rename ran: a
renamed file under neither name -- by wrapping discovery's directory listing, and the
waits between listings are counted, not slept (``settle_waits``). The rows read are
compared with the log before the compaction (``old``) and after an uninterrupted one
(``new``, which recovery also leaves).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_kafkalog.log.maintain import compact_topic
from spark_kafkalog.log.read import discovery
from spark_kafkalog.log.read.snapshot import SETTLE_TRIES
from spark_kafkalog.log.write import recover_topic
from spark_kafkalog.log.files.lock import TopicLock
from tests.log.killing import run_killed
from tests.log.test_compact import T0, read_all
from tests.log.test_compact_crash import SETTINGS, _fresh, pristine  # noqa: F401 (fixture)
from tests.log.test_crash import FS


def killed_at(pristine, root: Path, point: str) -> Path:
    """A copy of the pristine log whose compaction was killed right after its first
    ``point`` step."""
    src, _, _, points = pristine
    _fresh(src, root)
    assert run_killed(lambda f: compact_topic(str(root), "c", SETTINGS, now_ms=T0, fault=f),
                      points.index(point) + 1)
    return root


@pytest.fixture
def listings(monkeypatch):
    """Counts listings of partition dir ``c-0``; ``tear`` holds names to leave out of the
    next listings of it, one per listing (as a rename under the listing would)."""
    real = discovery._dir_files
    seen = {"count": 0, "tear": []}

    def listing(fs, path, infos):
        files = real(fs, path, infos)
        if path.rstrip("/").endswith("/c-0"):
            seen["count"] += 1
            if seen["tear"]:
                gone = seen["tear"].pop(0)
                files = [f for f in files if f[0] != gone]
        return files

    monkeypatch.setattr(discovery, "_dir_files", listing)
    return seen


def read0(root: Path) -> list:
    return read_all(root, "c", partitions=[0])


def test_a_killed_swap_is_read_with_one_listing(pristine, tmp_path, settle_waits,
                                                listings):
    _, old, new, _ = pristine
    root = killed_at(pristine, tmp_path / "k", "delete-old")
    assert read0(root) == new[0]
    killed = listings["count"]
    recover_topic(FS, str(root), "c")
    listings["count"] = 0
    assert read0(root) == new[0]
    assert killed == listings["count"] and not settle_waits


def test_a_listing_torn_differently_each_time_waits(pristine, tmp_path, settle_waits,
                                                    listings):
    """Mid-swap every new ``.log`` is a ``.swap``: listings that each miss another of
    them are no state of the swap and change from one to the next: listed again each
    time, then the whole listing is read."""
    _, old, new, _ = pristine
    root = killed_at(pristine, tmp_path / "k", "delete-old")
    swaps = sorted(n for n in os.listdir(root / "c-0") if n.endswith(".log.swap"))
    assert len(swaps) >= 3
    listings["tear"] = swaps[:3]
    assert read0(root) == new[0]
    assert len(settle_waits) == 3 and not listings["tear"]


def _hand_changed(pristine, root: Path) -> Path:
    """Killed right after the first ``.swap -> final`` rename (partition 0's highest
    group: its ``.log``), then that group's ``.timeindex.swap`` renamed by hand before
    its ``.index.swap``: no state of the swap has that, yet it reads as the new log."""
    killed_at(pristine, root, "swapped")
    d = root / "c-0"
    names = os.listdir(d)
    [base] = [n.split(".")[0] for n in names
              if n.endswith(".index.swap") and n.replace(".index.swap", ".log") in names]
    os.rename(d / f"{base}.timeindex.swap", d / f"{base}.timeindex")
    return root


def test_a_still_left_over_state_is_taken_on_its_second_listing(pristine, tmp_path,
                                                                 settle_waits, listings):
    _, old, new, _ = pristine
    root = _hand_changed(pristine, tmp_path / "k")
    assert read0(root) == new[0]
    assert len(settle_waits) == 1
    recover_topic(FS, str(root), "c")
    assert read0(root) == new[0]


def test_a_repeated_listing_still_waits_while_a_writer_holds_the_lock(
        pristine, tmp_path, settle_waits):
    """The same state while a (live) writer holds the topic's lock: it could be renaming,
    so the reader lists again until it gives up waiting, then reads what it has."""
    _, old, new, _ = pristine
    root = _hand_changed(pristine, tmp_path / "k")
    with TopicLock(FS, str(root), "c", timeout=0):
        assert read0(root) == new[0]
    assert len(settle_waits) == SETTLE_TRIES

"""A compaction killed at any step, then the log dir opened by a Kafka broker, then by us.

A broker that starts on a log dir finishes or undoes an interrupted swap by its own
rules, not ours (``LogLoader.load`` and ``removeTempFilesAndCollectSwapFiles`` in
Apache Kafka's storage module), restated in :func:`broker_opens` from Kafka's source:

1. every ``*.deleted`` file is deleted; every ``*.swap`` file whose base offset is at or
   above the smallest ``*.cleaned`` base offset is deleted; every ``*.cleaned`` file is
   deleted;
2. over the remaining ``<base>.log.swap`` files: ``lo`` = the smallest base offset,
   ``hi`` = the largest next offset (``LogSegment.readNextOffset``: one past the last
   batch, the base offset when empty); every file not ending in ``.swap`` whose name
   starts with an offset in ``[lo, hi)`` is deleted;
3. every ``*.swap`` file is renamed to its name without ``.swap``;
4. an index file without its ``.log`` is deleted.

After a SIGKILL at each fault point of a compaction and such a start, and again after
our next open (recovery) and a new compaction, each partition reads (by kafka-python)
exactly the old log or exactly the new one -- nothing lost -- and the
``cleaner-offset-checkpoint`` (Kafka's text format, read here) marks no offset clean
unless the records below it are the cleaned ones.
"""
from __future__ import annotations

import math
import os
import shutil
import struct
from pathlib import Path

import pytest

from spark_kafkalog.log.maintain import CompactSettings, compact_topic
from spark_kafkalog.log.write import recover_topic
from tests.log.killing import FaultCounter, run_killed
from tests.log.logbuilder import LogDirBuilder, rec
from tests.log.test_compact import T0, build, check_clean, kafka_python_reads
from tests.log.test_crash import FS


def _offset_of(name: str) -> int:
    """``LogFileUtils.offsetFromFile``: the number before the first dot (ValueError
    when there is none, as Java's parse fails)."""
    if "." not in name:
        raise ValueError(name)
    return int(name[:name.index(".")])


def _next_offset(path: Path, base: int) -> int:
    data = path.read_bytes()
    pos, nxt = 0, base
    while pos + 17 <= len(data):
        offset, length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + length > len(data):
            break
        magic = data[pos + 16]
        last = offset + struct.unpack_from(">i", data, pos + 23)[0] if magic >= 2 else offset
        nxt = last + 1
        pos += 12 + length
    return nxt


def broker_opens(pdir: Path) -> None:
    """A broker's startup on partition dir ``pdir`` (the module doc's four passes)."""
    def files():
        return sorted(n for n in os.listdir(pdir) if (pdir / n).is_file())

    min_cleaned, cleaned, swaps = math.inf, [], []
    for n in files():
        if n.endswith(".deleted") and not n.endswith(".checkpoint.deleted"):
            (pdir / n).unlink()
        elif n.endswith(".cleaned"):
            min_cleaned = min(min_cleaned, _offset_of(n))
            cleaned.append(n)
        elif n.endswith(".swap"):
            swaps.append(n)
    valid = []
    for n in swaps:
        if _offset_of(n) >= min_cleaned:
            (pdir / n).unlink()
        else:
            valid.append(n)
    for n in cleaned:
        (pdir / n).unlink()
    lo, hi = math.inf, -math.inf
    for n in valid:
        if n[:-len(".swap")].endswith(".log"):
            base = _offset_of(n)
            lo, hi = min(lo, base), max(hi, _next_offset(pdir / n, base))
    for n in files():
        if not n.endswith(".swap"):
            try:
                off = _offset_of(n)
            except ValueError:
                continue
            if lo <= off < hi:
                (pdir / n).unlink()
    for n in files():
        if n.endswith(".swap"):
            os.replace(pdir / n, pdir / n[:-len(".swap")])
    for n in files():
        if n.endswith((".index", ".timeindex", ".txnindex")) and \
                not (pdir / f"{n.rsplit('.', 1)[0]}.log").exists():
            (pdir / n).unlink()


def cleaner_checkpoint(root: Path) -> dict:
    """``cleaner-offset-checkpoint``: version line, count line, ``topic partition offset``."""
    path = root / "cleaner-offset-checkpoint"
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2
    return {(t, int(p)): int(o) for t, p, o in (x.split() for x in lines[2:])}


def gapped_log(root: Path, b: LogDirBuilder) -> None:
    """Topic ``c`` partition 0: a segment the cleaner changes, one it leaves as it is
    (its keys are unique), one it changes, one it leaves, then the active segment."""
    p = b.partition("c", 0)
    for seg in (["a", "a", "a", "z"], ["u1", "u2", "u3"], ["b", "b", "y"], ["u4"]):
        for k in seg:
            p.append([rec(k.encode(), b"v-" + k.encode(), ts=T0)])
        p.roll()
    p.append([rec(b"x", b"active", ts=T0)])
    p.high_watermark = p.log_end_offset


def two_partitions(root: Path, b: LogDirBuilder) -> None:
    build(root, 11, 0, b)
    build(root, 12, 1, b)


LOGS = {  # name -> (builder, partitions, settings)
    "gapped": (gapped_log, [0], CompactSettings(segment_bytes=100, force=True)),
    "random": (two_partitions, [0, 1],
               CompactSettings(segment_bytes=2500, delete_retention_ms=3_600_000)),
}


def reads(root: Path, parts) -> dict:
    return {q: sorted(kafka_python_reads(root / f"c-{q}")) for q in parts}


@pytest.fixture(scope="module", params=["gapped",
                                        pytest.param("random", marks=pytest.mark.slow)])
def pristine(request, tmp_path_factory):
    make, parts, settings = LOGS[request.param]
    base = tmp_path_factory.mktemp(request.param)
    b = LogDirBuilder(base / "log")
    make(base / "log", b)
    b.write()
    done = base / "done"
    shutil.copytree(base / "log", done)
    counter = FaultCounter()
    compact_topic(str(done), "c", settings, now_ms=T0, fault=counter)
    old, new = reads(base / "log", parts), reads(done, parts)
    assert all(len(new[q]) < len(old[q]) for q in parts)
    return base / "log", parts, settings, old, new, counter.points


def check(root: Path, parts, old: dict, new: dict, when: str) -> dict:
    """Each partition reads old or new; the checkpoint claims only cleaned records."""
    seen = reads(root, parts)
    marks = cleaner_checkpoint(root)
    for q in parts:
        assert seen[q] in (old[q], new[q]), (when, q, "records lost or mixed")
        mark = marks.get(("c", q))
        if mark is not None:
            assert [x for x in seen[q] if x[0] < mark] == \
                [x for x in new[q] if x[0] < mark], (when, q, f"checkpoint {mark} claims "
                                                     "records that were not cleaned")
    return seen


def test_a_segment_left_between_two_cleaned_ones_is_swapped_too(tmp_path):
    """The gapped log's second segment keeps its records, but lies in the range a broker
    replaces by the ``.swap`` files: it is a group of its own, linked, not rewritten."""
    b = LogDirBuilder(tmp_path)
    gapped_log(tmp_path, b)
    b.write()
    [r] = compact_topic(str(tmp_path), "c", LOGS["gapped"][2], now_ms=T0)
    assert [g[0] for g in r.groups] == [0, 4, 7] and sorted(r.fingerprints) == [0, 7]
    assert r.bytes_after < r.bytes_before


@pytest.mark.parametrize("then_recover", [False, True], ids=["broker", "broker+recover"])
def test_killed_at_every_step_then_a_broker_start(pristine, tmp_path, then_recover):
    src, parts, settings, old, new, points = pristine
    outcomes = set()
    for kill_at in range(1, len(points) + 1):
        root = tmp_path / f"k{kill_at}"
        shutil.copytree(src, root)
        step = points[kill_at - 1]
        assert run_killed(lambda f: compact_topic(str(root), "c", settings, now_ms=T0,
                                                  fault=f), kill_at)
        for q in parts:
            broker_opens(root / f"c-{q}")
        seen = check(root, parts, old, new, f"kill at {kill_at} ({step}), broker")
        outcomes.add(tuple(seen[q] == new[q] for q in parts))
        if then_recover:
            recover_topic(FS, str(root), "c")
            assert check(root, parts, old, new, f"kill at {kill_at} ({step}), recovery") \
                == seen
            compact_topic(str(root), "c", settings, now_ms=T0)
            assert check(root, parts, old, new, f"kill at {kill_at} ({step}), again") \
                == new
            check_clean(root)
        shutil.rmtree(root)
    # the kills reach both outcomes: the broker undid the swap, or finished it
    assert {all(o) for o in outcomes} == {True, False}

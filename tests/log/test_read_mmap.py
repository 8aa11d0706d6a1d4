"""Window reads: memory-mapped (``memory_map=True``), read into a buffer on the local
filesystem, and read through a wrapped (non-local) filesystem must give the same rows,
the same stats and read every byte once, whatever the window size (small windows end
inside batches, so the carried partial batch is exercised)."""
import warnings

import pyarrow as pa
import pytest

from spark_kafkalog.errors import CorruptRecordError
from spark_kafkalog.log import LogDirs, ReadStats, TornTailWarning, read_partition

from .fsutil import CountingFileSystem
from .logbuilder import build_rich_partition, flip_byte

TOPIC = "a.b-c_d"


def _read(root, *, filesystem=None, **kw):
    logdirs = LogDirs(str(root), filesystem=filesystem)
    part = logdirs.partition(TOPIC, 0)
    s = logdirs.state(part, on_corruption=kw.get("on_corruption", "fail"))
    stats = ReadStats()
    t = pa.Table.from_batches(list(read_partition(
        logdirs, part, start_offset=s.log_start_offset, end_offset=1 << 40,
        stats=stats, **kw)))
    return t, stats


@pytest.mark.parametrize("window_bytes", [64, 700, 4096, 1 << 20])
def test_same_rows_and_bytes_every_way(tmp_path, window_bytes):
    b, _ = build_rich_partition(tmp_path / "logs")
    root = b.roots[0]
    want, want_stats = _read(root, window_bytes=window_bytes)
    mapped, mapped_stats = _read(root, window_bytes=window_bytes, memory_map=True)
    counting = CountingFileSystem()
    remote, remote_stats = _read(root, filesystem=counting.fs, window_bytes=window_bytes)
    assert want.num_rows > 0
    assert mapped.equals(want) and remote.equals(want)
    for st in (mapped_stats, remote_stats):
        assert (st.bytes_read, st.batches, st.records) == \
            (want_stats.bytes_read, want_stats.batches, want_stats.records)
    # the carried tail of a window is not read again
    log_bytes = sum(seg.size for seg in LogDirs(str(root)).partition(TOPIC, 0).segments)
    assert want_stats.bytes_read <= log_bytes
    assert counting.bytes_read >= want_stats.bytes_read


def test_mapped_torn_tail_and_skip(tmp_path):
    b, p = build_rich_partition(tmp_path / "logs")
    part_dir = b.roots[0] / f"{TOPIC}-0"
    last = p.batches[-1]
    last_log = part_dir / f"{last.segment:020d}.log"
    with open(last_log, "r+b") as f:
        f.truncate(last.position + last.size - 5)
    first = p.batches[0]
    flip_byte(part_dir / f"{first.segment:020d}.log", first.position + 40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornTailWarning)
        with pytest.raises(CorruptRecordError):
            _read(b.roots[0], memory_map=True, window_bytes=512)
        got = [_read(b.roots[0], memory_map=mm, window_bytes=512, on_corruption="skip")
               for mm in (False, True)]
    (t0, s0), (t1, s1) = got
    assert t1.equals(t0) and t0.num_rows > 0
    assert s1.skipped == s0.skipped and len(s0.skipped) == 1
    assert s1.torn_tail == s0.torn_tail == (str(last_log), last.position, last.size - 5)


def test_window_buffers_are_reused_only_when_nothing_views_them(tmp_path):
    """A segment read window by window reuses one buffer while the consumer lets each
    window go, and never overwrites a window the consumer still holds."""
    # SegmentFile._buffer is private: it is patched to count the fresh buffers made (the
    # class moved from log/segment.py to log/io/segment_file.py in the log/ split)
    from spark_kafkalog.log.io.segment_file import SegmentFile
    from spark_kafkalog.log.read import scan as seg_mod

    b, _ = build_rich_partition(tmp_path / "logs")
    part = LogDirs(str(b.roots[0])).partition(TOPIC, 0)
    fs = LogDirs(str(b.roots[0])).filesystem
    fresh = []
    orig = SegmentFile._buffer

    def counting(self, length):
        before = [id(b) for b in self._pool]
        out = orig(self, length)
        fresh.append(id(out.base) not in before)
        return out

    SegmentFile._buffer = counting
    try:
        # consumer that drops each window: after the first, buffers are reused
        n = 0
        for w in seg_mod.scan_windows(fs, part, window_bytes=700):
            assert len(w.data) > 0
            n += 1
        assert n > 4 and fresh.count(False) >= 2
        # consumer that keeps every window: each keeps its own bytes
        fresh.clear()
        kept = list(seg_mod.scan_windows(fs, part, window_bytes=700))
        assert all(fresh)
    finally:
        SegmentFile._buffer = orig
    for w in kept:
        with open(w.path, "rb") as f:
            f.seek(w.position)
            assert bytes(w.data) == f.read(len(w.data))

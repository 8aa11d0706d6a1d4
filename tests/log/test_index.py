import struct

import numpy as np
import pyarrow.fs as pafs
import pytest

from spark_kafkalog.errors import LogLayoutError
from spark_kafkalog.log.files.index import (encode_offset_index, encode_time_index,
                                      parse_offset_index, parse_time_index,
                                      read_offset_index, read_time_index)

from .fsutil import CountingFileSystem

FS = pafs.LocalFileSystem()


def oi(*entries):
    return b"".join(struct.pack(">ii", r, p) for r, p in entries)


def ti(*entries):
    return b"".join(struct.pack(">qi", t, r) for t, r in entries)


def test_offset_index_lookup():
    idx = parse_offset_index(oi((3, 4730), (7, 9571)), 100)
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(100) == (100, 0)
    assert idx.lookup(103) == (103, 4730)
    assert idx.lookup(106) == (103, 4730)
    assert idx.lookup(10**12) == (107, 9571)
    assert idx.last == (107, 9571)


def test_zero_tail_stops_like_dump_log_segments():
    # entry 0 may be (0, 0): a first batch that ends at the base offset
    idx = parse_offset_index(oi((0, 0), (5, 4200), (9, 8500)) + b"\0" * 800, 50)
    assert idx.offsets.tolist() == [50, 55, 59] and idx.positions.tolist() == [0, 4200, 8500]
    assert idx.file_entries == 103
    # an all-zero preallocated file keeps only entry 0 = (base, 0), which claims nothing
    idx = parse_offset_index(b"\0" * 8000, 50)
    assert idx.offsets.tolist() == [50] and idx.lookup(1000) == (50, 0)
    t = parse_time_index(b"\0" * 1200, 50)
    assert len(t) == 0


def test_partial_trailing_entry_is_ignored():
    idx = parse_offset_index(oi((1, 100), (2, 200)) + b"\0\0\0", 0)
    assert idx.offsets.tolist() == [1, 2]


def test_inconsistent_entries_are_dropped():
    # positions beyond the .log, offsets at/after the next segment, non-increasing entries
    data = oi((1, 100), (2, 200), (3, 150), (4, 400))
    idx = parse_offset_index(data, 0)
    assert idx.offsets.tolist() == [1, 2] and idx.dropped == 2
    idx = parse_offset_index(oi((1, 100), (2, 5000)), 0, segment_size=4000)
    assert idx.offsets.tolist() == [1]
    idx = parse_offset_index(oi((1, 100), (20, 200)), 0, next_base_offset=10)
    assert idx.offsets.tolist() == [1]
    assert len(parse_offset_index(oi((0, 0)), 0, segment_size=0)) == 0


def test_time_index():
    t = parse_time_index(ti((1000, 3), (2000, 7), (2000, 9), (3000, 12)) + b"\0" * 120, 0)
    assert t.timestamps.tolist() == [1000, 2000, 2000, 3000]
    assert t.last_before(1000) is None
    assert t.last_before(1001) == (1000, 3)
    assert t.last_before(2000) == (1000, 3)        # strictly below: equal ts may be earlier
    assert t.last_before(2500) == (2000, 9)
    assert t.last == (3000, 12)
    # timestamps going backwards end the valid part
    t = parse_time_index(ti((1000, 3), (900, 7)), 0)
    assert t.timestamps.tolist() == [1000]


def test_encoders_round_trip_and_validate():
    entries = [(103, 4730), (107, 9571)]
    assert parse_offset_index(encode_offset_index(entries, 100), 100).lookup(200) == (107, 9571)
    tentries = [(1000, 103), (2000, 107)]
    t = parse_time_index(encode_time_index(tentries, 100), 100)
    assert list(zip(t.timestamps.tolist(), t.offsets.tolist())) == tentries
    with pytest.raises(LogLayoutError):
        encode_offset_index([(5, 10), (4, 20)], 0)
    with pytest.raises(LogLayoutError):
        encode_offset_index([(1 << 32, 10)], 0)
    with pytest.raises(LogLayoutError):
        encode_time_index([(5, 10), (5, 20)], 0)


def test_preallocated_index_reads_only_its_live_prefix(tmp_path):
    live = oi(*[(i * 10 + 9, i * 4096) for i in range(1, 200)])
    p = tmp_path / "00000000000000000000.index"
    p.write_bytes(live + b"\0" * (10 * 1024 * 1024 - len(live)))
    counting = CountingFileSystem()
    idx = read_offset_index(counting.fs, str(p), 0)
    assert len(idx) == 199 and idx.last == (1999, 199 * 4096)
    assert len(live) <= counting.bytes_read < len(live) + 64 * 12   # probes are tiny
    tp = tmp_path / "00000000000000000000.timeindex"
    tlive = ti(*[(1000 + i, i * 10) for i in range(1, 50)])
    tp.write_bytes(tlive + b"\0" * (10 * 1024 * 1024 - 12 * 49 - 4))
    counting.reset()
    t = read_time_index(counting.fs, str(tp), 0)
    assert len(t) == 49 and t.last == (1049, 490)
    assert len(tlive) <= counting.bytes_read < len(tlive) + 64 * 12
    assert read_offset_index(FS, str(tmp_path / "missing.index"), 0) is None


def test_real_broker_index_files(real_broker):
    d = real_broker / "niloufar-ldi-poc" / "__consumer_offsets-6"
    idx = read_offset_index(FS, str(d / "00000000000000000000.index"), 0, segment_size=13751)
    assert list(zip(idx.offsets.tolist(), idx.positions.tolist())) == [(3, 4730), (7, 9571)]
    t = read_time_index(FS, str(d / "00000000000000000000.timeindex"), 0)
    assert list(zip(t.timestamps.tolist(), t.offsets.tolist())) == [
        (1769791783399, 3), (1769792518093, 7), (1769793578176, 12)]
    d = real_broker / "donaldy-kafka-2.7.1" / "__consumer_offsets-39"
    assert len(read_offset_index(FS, str(d / "00000000000000000000.index"), 0)) == 0
    t = read_time_index(FS, str(d / "00000000000000000000.timeindex"), 0)
    assert t.last == (1685814551582, 17)
    assert isinstance(t.timestamps, np.ndarray)


@pytest.mark.parametrize("kind", ["index", "timeindex"])
def test_an_index_trimmed_while_it_is_read_reads_its_live_prefix(tmp_path, kind):
    """A broker trims the active segment's preallocated index to its entries when the
    segment rolls; a reader that took the file's size before the trim then reads past
    its new end. What it reads is the live prefix, as from the trimmed file (it was a
    struct.error escaping from the zero-tail bisection)."""
    import os

    from spark_kafkalog.log.files import index as index_mod

    n = 150
    if kind == "index":
        live, read = oi(*[(i * 10 + 9, i * 4096) for i in range(1, n + 1)]), read_offset_index
    else:
        live, read = ti(*[(1000 + i, i * 10) for i in range(1, n + 1)]), read_time_index
    p = tmp_path / f"00000000000000000000.{kind}"
    p.write_bytes(live + b"\0" * (1024 * 1024 - len(live)))
    preallocated = os.path.getsize(p)
    real_open = index_mod.open_listed

    def trimmed_after_size(fs, path):
        f = real_open(fs, path)
        os.truncate(path, len(live))            # the broker's roll, just after the open

        class Stale:
            def size(self):
                return preallocated             # the size taken before the trim

            def __getattr__(self, name):
                return getattr(f, name)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                f.close()
        return Stale()

    want = read(FS, str(p), 0)
    p.write_bytes(live + b"\0" * (1024 * 1024 - len(live)))
    index_mod.open_listed = trimmed_after_size
    try:
        got = read(FS, str(p), 0)
    finally:
        index_mod.open_listed = real_open
    assert len(got) == len(want) == n and got.last == want.last

"""walk_batches: the header-only walk a writer runs before appending, checked against
the compiled header scan (scan_windows) on the same segments."""
from pathlib import Path
import pyarrow.fs as pafs
import pytest

from spark_kafkalog.errors import CorruptRecordError
from spark_kafkalog.log import LogDirs
from spark_kafkalog.log.read.scan import scan_windows, walk_batches

from .logbuilder import LogDirBuilder, build_rich_partition, rec, sample_records, tear_tail

FS = pafs.LocalFileSystem()


def _scanned(p, i):
    """(positions, last offsets, max timestamps) of segment i by the compiled scan."""
    pos, last, ts = [], [], []
    for w in scan_windows(FS, p, segment_index=i, one_segment=True):
        h = w.headers
        pos += h["position"].tolist()
        last += h["last_offset"].tolist()
        ts += h["max_timestamp"].tolist()
    return pos, last, ts


def _pread(path):
    f = open(path, "rb")

    def read(position, length):
        f.seek(position)
        return f.read(length)
    return f, read


def test_walk_agrees_with_the_scan_on_every_batch_kind(tmp_path):
    b, _ = build_rich_partition(tmp_path / "logs")
    p = LogDirs(str(b.roots[0])).partition("a.b-c_d", 0)
    assert len(p.segments) == 3
    for i, seg in enumerate(p.segments):
        f, read = _pread(seg.path)
        with f:
            got = walk_batches(read, 0, seg.size, seg.path)
        assert got == _scanned(p, i)
        assert len(got[0]) > 3
        # a pyarrow file works as well as a read callable, and from a batch start on
        with FS.open_input_file(seg.path) as af:
            assert walk_batches(af, got[0][2], seg.size, seg.path) == tuple(
                x[2:] for x in got)


def test_walk_reads_legacy_messages(tmp_path):
    b = LogDirBuilder(tmp_path / "logs")
    p = b.partition("legacy", 0)
    p.append_legacy(0, [rec(None, b"m1"), rec(b"k", b"m2")])
    p.append_legacy(1, [rec(None, b"l1"), rec(None, b"l2")], compression="gzip")
    p.append_legacy(1, [rec(None, b"l3")])
    p.append(sample_records(3, b"v2"))
    b.write()
    part = LogDirs(str(b.roots[0])).partition("legacy", 0)
    seg = part.segments[0]
    f, read = _pread(seg.path)
    with f:
        got = walk_batches(read, 0, seg.size, seg.path)
    assert got == _scanned(part, 0)
    assert got[1] == [0, 1, 3, 4, 7]              # a compressed wrapper's offset is its last
    assert got[2][:2] == [-1, -1]                 # magic 0 has no timestamp


def test_a_torn_tail_is_an_error_only_in_strict_mode(tmp_path):
    b, _ = build_rich_partition(tmp_path / "logs")
    p = LogDirs(str(b.roots[0])).partition("a.b-c_d", 0)
    seg = p.segments[-1]
    whole = _scanned(p, len(p.segments) - 1)
    tear_tail(tmp_path / "logs" / "a.b-c_d-0" / seg.path.rsplit("/", 1)[1], 7)
    size = seg.size - 7
    f, read = _pread(seg.path)
    with f:
        with pytest.raises(CorruptRecordError, match="torn batch") as err:
            walk_batches(read, 0, size, seg.path)
        assert err.value.position == whole[0][-1]
        assert err.value.path == seg.path
        assert walk_batches(read, 0, size, seg.path, strict=False) == tuple(
            x[:-1] for x in whole)
        # a cut inside the first 17 bytes of a batch ends the walk too
        assert walk_batches(read, 0, whole[0][-1] + 5, seg.path, strict=False) == tuple(
            x[:-1] for x in whole)


def test_impossible_batches_raise_in_both_modes(tmp_path):
    b, _ = build_rich_partition(tmp_path / "logs")
    p = LogDirs(str(b.roots[0])).partition("a.b-c_d", 0)
    seg = p.segments[0]
    positions = _scanned(p, 0)[0]
    data = bytearray(Path(seg.path).read_bytes())
    bad_magic = bytearray(data)
    bad_magic[positions[1] + 16] = 7
    backwards = bytearray(data)
    backwards[positions[2]:positions[2] + 8] = (0).to_bytes(8, "big")
    for buf, why in ((bad_magic, "unknown magic 7"), (backwards, "offsets go backwards")):
        for strict in (True, False):
            with pytest.raises(CorruptRecordError, match=why) as err:
                walk_batches(lambda pos, n: bytes(buf[pos:pos + n]), 0, len(buf), seg.path,
                             strict=strict)
            assert err.value.path == seg.path
            assert err.value.position in positions[1:3]

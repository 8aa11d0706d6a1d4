import pickle

import pyarrow.fs as pafs
import pytest

from spark_kafkalog.errors import InvalidOptionError, LogLayoutError
from spark_kafkalog.log.io import (read_range, read_small_file, resolve_filesystem,
                                   write_atomic)


def test_local_paths_and_file_uris(tmp_path):
    fs, path = resolve_filesystem(str(tmp_path))
    assert isinstance(fs, pafs.LocalFileSystem) and path == str(tmp_path)
    fs, path = resolve_filesystem(f"file://{tmp_path}")
    assert isinstance(fs, pafs.LocalFileSystem) and path == str(tmp_path)


def test_s3_options_pass_through_to_arrow():
    opts = {"fs.s3.endpoint": "http://127.0.0.1:5999", "s3.region": "eu-west-1",
            "S3.ACCESS_KEY": "ak", "s3.secret_key": "sk"}
    fs, path = resolve_filesystem("s3://bucket/some/logs/", opts)
    assert isinstance(fs, pafs.S3FileSystem)
    assert path == "bucket/some/logs"
    assert fs.region == "eu-west-1"
    # endpoint with a scheme sets Arrow's scheme and host separately; survives pickling
    fs2 = pickle.loads(pickle.dumps(fs))
    assert fs2.equals(fs)
    assert "127.0.0.1:5999" in repr(fs.__reduce__())
    assert "'http'" in repr(fs.__reduce__())


def test_s3_endpoint_override_spelling_and_uri_query():
    fs, _ = resolve_filesystem("s3://b/p", {"s3.endpoint_override": "127.0.0.1:1",
                                            "s3.scheme": "http", "s3.anonymous": "true"})
    assert "127.0.0.1:1" in repr(fs.__reduce__())
    fs, path = resolve_filesystem("s3://b/p?endpoint_override=127.0.0.1%3A2&scheme=http"
                                  "&region=us-east-1")
    assert path == "b/p" and "127.0.0.1:2" in repr(fs.__reduce__())


@pytest.mark.parametrize("opts", [{"s3.endpiont": "x"}, {"nope.x": "1"}, {"s3": "1"},
                                  {"s3.anonymous": "maybe"}, {"hdfs.port": "eighty"}])
def test_bad_options_name_the_option(opts):
    with pytest.raises(InvalidOptionError) as e:
        resolve_filesystem("s3://b/p", opts)
    assert list(opts)[0] in str(e.value)


def test_unsupported_scheme():
    with pytest.raises(InvalidOptionError, match="ftp"):
        resolve_filesystem("ftp://host/x")


def test_options_of_other_families_are_validated_but_unused(tmp_path):
    fs, _ = resolve_filesystem(str(tmp_path), {"s3.region": "x"})
    assert isinstance(fs, pafs.LocalFileSystem)


def test_read_helpers(tmp_path):
    fs = pafs.LocalFileSystem()
    p = tmp_path / "f"
    p.write_bytes(b"0123456789")
    assert read_range(fs, str(p), 3, 4) == b"3456"
    assert read_range(fs, str(p), 8, 10) == b"89"
    assert read_small_file(fs, str(p), 100) == b"0123456789"
    assert read_small_file(fs, str(tmp_path / "missing"), 100) is None
    with pytest.raises(LogLayoutError, match="more than"):
        read_small_file(fs, str(p), 5)


def test_write_atomic_replaces(tmp_path):
    fs = pafs.LocalFileSystem()
    p = tmp_path / "ckpt"
    write_atomic(fs, str(p), b"one")
    write_atomic(fs, str(p), b"two")
    assert p.read_bytes() == b"two"
    assert not (tmp_path / "ckpt.tmp").exists()


def test_write_fully_writes_everything_in_pieces(tmp_path, monkeypatch):
    """Every byte lands where asked, however short the system calls' writes, and no call
    is larger than WRITE_PIECE_BYTES (larger writes get 2 MiB page-cache folios, slow to
    get on virtual machines that return free memory to the host)."""
    import os

    from spark_kafkalog.log.io import sysio as fsmod

    monkeypatch.setattr(fsmod, "WRITE_PIECE_BYTES", 1000)
    sizes = []
    real_pwrite, real_write = os.pwrite, os.write

    def pwrite(fd, data, position):             # short writes, as a signal may cause
        sizes.append(len(data))
        return real_pwrite(fd, bytes(data)[:777], position)

    def write(fd, data):
        sizes.append(len(data))
        return real_write(fd, bytes(data)[:333])

    monkeypatch.setattr(os, "pwrite", pwrite)
    monkeypatch.setattr(os, "write", write)
    data = os.urandom(10_001)
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fsmod.write_fully(fd, b"head")          # at the file offset
        fsmod.write_fully(fd, data, 5000)       # at a position
        fsmod.write_fully(fd, memoryview(data).cast("B")[:0], 5)
        fsmod.write_fully(fd, data[:2500])      # the offset moved by 4 only
    finally:
        os.close(fd)
    got = path.read_bytes()
    assert got[:4] == b"head" and got[5000:] == data
    assert got[4:2504] == data[:2500]
    assert sizes and max(sizes) <= 1000


def test_staging_and_segment_writes_go_in_pieces(tmp_path, monkeypatch):
    """The writer's large writes (staged sections, copied segments) are made in
    WRITE_PIECE_BYTES pieces; the log reads back exactly."""
    import os

    from spark_kafkalog.log.write import (AppendConfig, StagingWriter, TopicSpec,
                                             commit_write)
    from tests.log.test_appender import as_rows, recs
    from tests.log.test_appender_util import kp_encode, read_kp

    sizes = []
    real = os.pwrite

    def pwrite(fd, data, position):
        sizes.append(len(data))
        return real(fd, data, position)

    monkeypatch.setattr(os, "pwrite", pwrite)
    fs = pafs.LocalFileSystem()
    rows = recs(60, size=30_000)                 # ~1.8 MB, batches of ~150 KB
    data, table = kp_encode(rows, per_batch=5)
    assert len(data) > 1_500_000
    w = StagingWriter(fs, str(tmp_path), "batch:1", "t0", per_partition_files=True)
    w.add("t", 0, data, table)
    sf = w.finish()
    from spark_kafkalog.log.io import WRITE_PIECE_BYTES
    assert max(sizes) == WRITE_PIECE_BYTES
    sizes.clear()
    commit_write(fs, str(tmp_path), "batch:1", [sf], [TopicSpec("t", partitions_if_new=1)],
                 config=AppendConfig(adopt_min_bytes=1 << 40))     # copied, not adopted
    assert read_kp(f"{tmp_path}/t-0") == as_rows(rows, 0)
    assert sizes and max(sizes) <= WRITE_PIECE_BYTES


class _RenameOnly:
    """What write_atomic needs of HDFS: a rename that never replaces an existing file.
    ``crash_at``: the n-th move raises, as if the writer died just before it."""

    def __init__(self):
        import types

        # the local-disk handler behind the counting test filesystem; only move differs
        from .fsutil import _Handler

        outer = self

        class Handler(_Handler):
            def get_type_name(self):
                return "hdfs-like"

            def move(self, src, dest):
                if outer.crash_at is not None and len(outer.moves) == outer.crash_at:
                    raise OSError("killed before the rename")
                if self.inner.get_file_info(dest).type != pafs.FileType.NotFound:
                    raise OSError(f"rename: {dest} exists")
                outer.moves.append((src, dest))
                self.inner.move(src, dest)

        self.moves: list = []
        self.crash_at = None
        self.fs = pafs.PyFileSystem(Handler(types.SimpleNamespace(bytes_read=0, reads=0)))


def test_write_atomic_on_a_rename_filesystem(tmp_path):
    r = _RenameOnly()
    p = str(tmp_path / "journal")
    write_atomic(r.fs, p, b"one")
    write_atomic(r.fs, p, b"two")
    assert (tmp_path / "journal").read_bytes() == b"two"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["journal"]
    # every replacement is complete under its final name before the old file goes
    assert r.moves[-2:] == [(p + ".tmp", p + ".new"), (p + ".new", p)]


def test_write_atomic_on_a_rename_filesystem_survives_a_crash_at_each_step(tmp_path):
    p = str(tmp_path / "ckpt")
    # killed before tmp -> new: the old content stands, the partial tmp is ignored
    r = _RenameOnly()
    write_atomic(r.fs, p, b"old")
    r.crash_at = len(r.moves)
    with pytest.raises(OSError, match="killed"):
        write_atomic(r.fs, p, b"new content")
    assert read_small_file(r.fs, p, 100) == b"old"
    # killed between deleting the old file and new -> final: the complete .new is read
    r = _RenameOnly()
    write_atomic(r.fs, p, b"old")
    r.crash_at = len(r.moves) + 1
    with pytest.raises(OSError, match="killed"):
        write_atomic(r.fs, p, b"new content")
    assert not (tmp_path / "ckpt").exists()
    assert read_small_file(r.fs, p, 100) == b"new content"
    # the next write first finishes that rename: killed later, it leaves "new content"
    r.crash_at = len(r.moves) + 1
    with pytest.raises(OSError, match="killed"):
        write_atomic(r.fs, p, b"lost")
    assert (tmp_path / "ckpt").read_bytes() == b"new content"
    assert read_small_file(r.fs, p, 100) == b"new content"
    # and a write that is not interrupted completes over the leftovers
    r.crash_at = None
    write_atomic(r.fs, p, b"newest")
    assert read_small_file(r.fs, p, 100) == b"newest"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["ckpt"]
    # a local disk never looks at a .new file (os.replace is atomic there)
    assert read_small_file(pafs.LocalFileSystem(), str(tmp_path / "other"), 100) is None

import pickle

import pytest

from spark_kafkalog.errors import InvalidOptionError, LogLayoutError
from spark_kafkalog.log import LogDirs, parse_partition_dir_name

from .logbuilder import LogDirBuilder, copy_partition_dir, rec


@pytest.mark.parametrize("name,expected", [
    ("a.b-c_d-0", ("a.b-c_d", 0)),
    ("topic-12", ("topic", 12)),
    ("__consumer_offsets-49", ("__consumer_offsets", 49)),
    ("fetch1.mytopic.1p.gzip.kafka.0821-0", ("fetch1.mytopic.1p.gzip.kafka.0821", 0)),
    ("t-0.9f3c1a2b4d5e6f708192a3b4c5d6e7f8-delete", None),
    ("t-0.9f3c1a2b4d5e6f708192a3b4c5d6e7f8-future", None),
    ("t-0.9f3c1a2b4d5e6f708192a3b4c5d6e7f8-stray", None),
    ("remote-log-index-cache", None),
    ("lost+found", None),
    ("nodash", None),
    ("-3", None),
    ("t--1", ("t-", 1)),
    ("t-x", None),
    ("bad topic-0", None),
])
def test_partition_dir_names(name, expected):
    assert parse_partition_dir_name(name) == expected


def _build(tmp_path):
    b = LogDirBuilder(tmp_path / "d1", tmp_path / "d2")
    for part, root in ((0, 0), (1, 1), (2, 0)):
        p = b.partition("a.b-c_d", part, root=root)
        p.append([rec(None, b"v%d" % i) for i in range(3)])
        p.roll()
        p.append([rec(None, b"w")])
    b.partition("other", 0, root=1).append([rec(None, b"x")])
    b.partition("__cluster_metadata", 0, root=0).append([rec(None, b"m")])
    b.write()
    return b


def test_discovery_over_jbod_roots(tmp_path):
    _build(tmp_path)
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    # things a broker's startup skips
    copy_partition_dir(d1 / "a.b-c_d-0", d1 / "a.b-c_d-0.0123456789abcdef0123456789abcdef-delete")
    copy_partition_dir(d1 / "a.b-c_d-0", d2 / "a.b-c_d-0.0123456789abcdef0123456789abcdef-future")
    copy_partition_dir(d1 / "a.b-c_d-2", d2 / "a.b-c_d-5.0123456789abcdef0123456789abcdef-stray")
    (d1 / "remote-log-index-cache").mkdir()
    (d1 / "lost+found").mkdir()
    (d1 / "stray-file-7").write_text("x")
    logdirs = LogDirs(f"{d1},{d2}")
    assert logdirs.topics() == ["a.b-c_d", "other"]
    parts = logdirs.partitions("a.b-c_d")
    assert [(p.partition, p.root) for p in parts] == [(0, str(d1)), (1, str(d2)), (2, str(d1))]
    assert [s.base_offset for s in parts[0].segments] == [0, 3]
    seg = parts[0].segments[0]
    assert seg.path.endswith("00000000000000000000.log") and seg.size > 0
    assert seg.index_path.endswith(".index") and seg.timeindex_path.endswith(".timeindex")
    assert seg.txnindex_path is None
    assert logdirs.partition("a.b-c_d", 1).path == str(d2 / "a.b-c_d-1")
    with pytest.raises(LogLayoutError, match="a.b-c_d-7"):
        logdirs.partition("a.b-c_d", 7)
    with pytest.raises(LogLayoutError, match="nope"):
        logdirs.partitions("nope")
    # the metadata log only by name or with include_internal
    assert logdirs.partitions("__cluster_metadata")[0].partition == 0
    assert "__cluster_metadata" in LogDirs([str(d1), str(d2)], include_internal=True).topics()


def test_same_partition_in_two_roots_is_refused(tmp_path):
    _build(tmp_path)
    copy_partition_dir(tmp_path / "d1" / "a.b-c_d-0", tmp_path / "d2" / "a.b-c_d-0")
    with pytest.raises(LogLayoutError, match="two log dirs"):
        LogDirs([str(tmp_path / "d1"), str(tmp_path / "d2")]).topics()


def test_leftover_files_are_ignored(tmp_path):
    _build(tmp_path)
    d = tmp_path / "d1" / "a.b-c_d-0"
    (d / "00000000000000000000.log.deleted").write_bytes(b"junk")
    (d / "00000000000000000000.index.deleted").write_bytes(b"junk")
    (d / "00000000000000000001.log.cleaned").write_bytes(b"junk")
    (d / "00000000000000000099.index").write_bytes(b"")       # orphan index
    (d / "00000000000000000042.snapshot").write_bytes(b"")
    (d / "partition.metadata").write_text("version: 0\n")
    p = LogDirs(str(tmp_path / "d1")).partition("a.b-c_d", 0)
    assert [s.base_offset for s in p.segments] == [0, 3]
    assert [o for o, _ in p.snapshots] == [42]


def test_pickles_without_caches(tmp_path):
    _build(tmp_path)
    logdirs = LogDirs(str(tmp_path / "d1"))
    logdirs.partitions("a.b-c_d")
    clone = pickle.loads(pickle.dumps(logdirs))
    assert clone.roots == logdirs.roots and clone._partitions == {}
    assert clone.partitions("a.b-c_d") == logdirs.partitions("a.b-c_d")
    p = logdirs.partition("a.b-c_d", 0)
    assert pickle.loads(pickle.dumps(p)) == p


def test_missing_root_and_mixed_filesystems(tmp_path):
    with pytest.raises(LogLayoutError, match="does not exist"):
        LogDirs(str(tmp_path / "nope")).topics()
    with pytest.raises(InvalidOptionError, match="one filesystem"):
        LogDirs([str(tmp_path), "s3://bucket/x"], {"s3.region": "us-east-1"})
    with pytest.raises(InvalidOptionError):
        LogDirs(" , ")


def test_real_broker_discovery(real_broker):
    logdirs = LogDirs(str(real_broker / "donaldy-kafka-2.7.1"))
    assert logdirs.topics() == ["__consumer_offsets", "myTopic"]
    assert [p.partition for p in logdirs.partitions("__consumer_offsets")] == [8, 17, 28, 33, 39]
    my = logdirs.partition("myTopic", 0)
    assert [(s.base_offset, s.size) for s in my.segments] == [(38, 0)]
    kr = LogDirs(str(real_broker / "kafka-rust-testdata"))
    assert "fetch1.mytopic.1p.gzip.kafka.0821" in kr.topics()
    nl = LogDirs(str(real_broker / "niloufar-ldi-poc"))
    assert nl.topics() == ["Retry.TestTopicPatient", "TestTopicPatient", "__consumer_offsets"]


def test_partition_of_segment_for_single_file_tools(real_broker):
    import pyarrow.fs as pafs

    from spark_kafkalog.log import partition_of_segment, scan_windows

    fs = pafs.LocalFileSystem()
    d = real_broker / "niloufar-ldi-poc" / "__consumer_offsets-6"
    p = partition_of_segment(fs, str(d / "00000000000000000000.log"))
    assert (p.topic, p.partition) == ("__consumer_offsets", 6)
    seg = p.segments[0]
    assert seg.index_path.endswith(".index") and seg.txnindex_path is None
    rows = sum(len(w.headers) for w in scan_windows(fs, p))
    assert rows == 13
    with pytest.raises(LogLayoutError):
        partition_of_segment(fs, str(d / "00000000000000000000.index"))
    with pytest.raises(LogLayoutError):
        partition_of_segment(fs, str(d / "missing.log"))

import pyarrow.fs as pafs
import pytest

from spark_kafkalog.errors import LogLayoutError
from spark_kafkalog.log.files.checkpoint import (format_checkpoint, parse_checkpoint,
                                           parse_leader_epoch_checkpoint, read_checkpoint,
                                           read_leader_epoch_checkpoint, write_checkpoint,
                                           write_leader_epoch_checkpoint)

FS = pafs.LocalFileSystem()


def test_parse_like_kafka():
    data = b"0\n3\na.b-c_d 0 17\n__consumer_offsets 40 856\nt 2  5\n"
    assert parse_checkpoint(data) == {("a.b-c_d", 0): 17, ("__consumer_offsets", 40): 856,
                                      ("t", 2): 5}


@pytest.mark.parametrize("data", [b"", b"0\n", b"0\n0\n"])
def test_empty_files_have_no_entries(data):
    assert parse_checkpoint(data) == {}


@pytest.mark.parametrize("data,msg", [
    (b"1\n0\n", "version 1"),
    (b"0\n2\nt 0 1\n", "announces 2 entries but holds 1"),
    (b"0\n1\nt 0\n", "line 3"),
    (b"0\n1\nt x 1\n", "line 3"),
    (b"zero\n", "line 1"),
    (b"0\n1\n\xff 0 1\n", "UTF-8"),
])
def test_malformed_files_name_the_problem(data, msg, tmp_path):
    p = tmp_path / "replication-offset-checkpoint"
    p.write_bytes(data)
    with pytest.raises(LogLayoutError) as e:
        read_checkpoint(FS, str(p))
    assert msg in str(e.value) and str(p) in str(e.value)


def test_round_trip_and_atomic_write(tmp_path):
    p = tmp_path / "log-start-offset-checkpoint"
    m = {("t", 0): 5, ("a.b-c_d", 3): 1 << 40}
    write_checkpoint(FS, str(p), m)
    assert read_checkpoint(FS, str(p)) == m
    assert p.read_bytes() == format_checkpoint(m)
    assert p.read_bytes().startswith(b"0\n2\n")
    assert read_checkpoint(FS, str(tmp_path / "absent")) == {}


def test_leader_epoch_checkpoint(tmp_path):
    assert parse_leader_epoch_checkpoint(b"0\n2\n0 0\n3 120\n") == [(0, 0), (3, 120)]
    assert read_leader_epoch_checkpoint(FS, str(tmp_path / "x")) == []
    write_leader_epoch_checkpoint(FS, str(tmp_path / "x"), [(0, 0), (3, 120)])
    assert (tmp_path / "x").read_bytes() == b"0\n2\n0 0\n3 120\n"
    write_leader_epoch_checkpoint(FS, str(tmp_path / "x"), [])
    assert (tmp_path / "x").read_bytes() == b"0\n0\n"
    assert read_leader_epoch_checkpoint(FS, str(tmp_path / "x")) == []


def test_real_broker_checkpoints(real_broker):
    hw = read_checkpoint(FS, str(real_broker / "kafka-0.10-magic1" /
                                 "replication-offset-checkpoint"))
    assert hw[("__consumer_offsets", 40)] == 856
    assert hw[("TEST-TOPIC", 0)] == 21211
    assert len(hw) == 53
    assert read_checkpoint(FS, str(real_broker / "iechenyb-data" /
                                   "cleaner-offset-checkpoint")) == {}
    assert read_checkpoint(FS, str(real_broker / "donaldy-kafka-2.7.1" /
                                   "log-start-offset-checkpoint")) == {}
    assert read_leader_epoch_checkpoint(FS, str(real_broker / "donaldy-kafka-2.7.1" /
                                                "myTopic-0" / "leader-epoch-checkpoint")) \
        == [(0, 38)]

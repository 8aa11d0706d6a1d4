import struct

import pyarrow.fs as pafs
import pytest

from spark_kafkalog.errors import TxnIndexError
from spark_kafkalog.log.files.txn import (ABORTED_TXN, encode_producer_snapshot,
                                          encode_txn_index, parse_producer_snapshot,
                                          parse_txn_index, read_producer_snapshot,
                                          read_txn_index)

FS = pafs.LocalFileSystem()


def test_aborted_txn_entry_is_34_bytes():
    assert ABORTED_TXN.size == 34


def test_txn_index_round_trip_and_partial_tail():
    data = encode_txn_index([(7, 10, 15, 10), (9, 12, 20, 16)])
    assert len(data) == 68
    t = parse_txn_index(data + b"\x00" * 20)           # a torn append is ignored
    assert t.entries() == [(0, 7, 10, 15, 10), (0, 9, 12, 20, 16)]


@pytest.mark.parametrize("entry,msg", [
    (struct.pack(">hqqqq", 1, 7, 10, 15, 10), "version 1"),
    (struct.pack(">hqqqq", 0, 7, 16, 15, 10), "offsets 16..15"),
])
def test_txn_index_rejects_impossible_entries(entry, msg):
    with pytest.raises(TxnIndexError) as e:
        parse_txn_index(encode_txn_index([(1, 0, 2, 0)]) + entry, "x.txnindex")
    assert msg in str(e.value) and "position 34" in str(e.value)


def test_txn_index_marker_outside_segment():
    with pytest.raises(TxnIndexError):
        parse_txn_index(encode_txn_index([(1, 0, 2, 0)]), segment_base_offset=3)
    with pytest.raises(TxnIndexError):
        parse_txn_index(encode_txn_index([(1, 0, 9, 0)]), next_base_offset=9)


def test_missing_txn_index(tmp_path):
    assert read_txn_index(FS, str(tmp_path / "0.txnindex")) is None


def test_producer_snapshot_round_trip():
    data = encode_producer_snapshot([(7, 0, 3, 40, 0, 1000, 0, 35),
                                     (9, 1, 3, 41, 0, 1000, 0, -1)])
    assert len(data) == 10 + 2 * 46
    s = parse_producer_snapshot(data, 42)
    assert s.open_txn_first_offset == {7: 35} and s.last_offset == {7: 40, 9: 41}
    bad = bytearray(data)
    bad[-1] ^= 1
    with pytest.raises(TxnIndexError, match="CRC"):
        parse_producer_snapshot(bytes(bad), 42)
    import crc32c
    short = data[6:-1]                      # count says 2 entries, 91 bytes follow
    with pytest.raises(TxnIndexError, match="entries"):
        parse_producer_snapshot(struct.pack(">hI", 1, crc32c.crc32c(short)) + short, 42)


def test_real_broker_snapshots(real_broker):
    d = real_broker / "donaldy-kafka-2.7.1"
    s = read_producer_snapshot(FS, str(d / "myTopic-0" / "00000000000000000038.snapshot"), 38)
    assert len(s.last_offset) == 3 and s.open_txn_first_offset == {}
    s = read_producer_snapshot(FS, str(d / "__consumer_offsets-8" /
                                       "00000000000000000003.snapshot"), 3)
    assert s.last_offset == {}

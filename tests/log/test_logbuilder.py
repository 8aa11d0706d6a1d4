"""The log builder itself, checked against kafka-python's reader (so that tests built on
it test the reader, not the builder)."""
import struct

from kafka.record.memory_records import MemoryRecords

from .logbuilder import LogDirBuilder, rec


def _decode_segment(path):
    mr = MemoryRecords(path.read_bytes())
    out = []
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        assert batch.validate_crc()
        for r in batch:
            out.append((r.offset, r.key, r.value))
    return out


def test_segments_decode_with_kafka_python(tmp_path):
    b = LogDirBuilder(tmp_path / "logs")
    p = b.partition("a.b-c_d", 3)
    p.append([rec(b"k%d" % i, b"v%d" % i) for i in range(5)], compression="gzip")
    p.gap(3)
    p.append([rec(None, b"x"), rec(None, b"y")], offset_deltas=[0, 4], encoder="aiokafka",
             compression="lz4")
    p.roll()
    t = p.begin_txn(producer_id=11)
    p.append([rec(b"t", b"1")], txn=t)
    p.end_txn(t, commit=False)
    p.empty_batch(2)
    p.append_legacy(1, [rec(None, b"l1"), rec(None, b"l2")], compression="snappy")
    p.append_legacy(0, [rec(None, b"m1")])
    b.write()
    d = tmp_path / "logs" / "a.b-c_d-3"
    seg0 = _decode_segment(d / "00000000000000000000.log")
    assert [o for o, _, _ in seg0] == [0, 1, 2, 3, 4, 8, 12]
    assert d.joinpath("00000000000000000013.log").exists()
    seg1 = _decode_segment(d / "00000000000000000013.log")
    # data, ABORT marker, (empty batch has no records), legacy v1 wrapper, legacy v0
    offsets = [o for o, _, _ in seg1]
    assert offsets == [13, 14, 17, 18, 19]
    assert seg1[1][1] == struct.pack(">hh", 0, 0)     # ABORT control key
    assert [r.offset for r in p.expected_rows("read_committed")] == [0, 1, 2, 3, 4, 8, 12, 17,
                                                                     18, 19]
    assert p.txns[0].committed is False and p.txns[0].marker_offset == 14
    txnindex = (d / "00000000000000000013.txnindex").read_bytes()
    assert struct.unpack(">hqqqq", txnindex) == (0, 11, 13, 14, 15)

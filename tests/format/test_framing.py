"""The C framing of lz4 and snappy (``_framing.h``) on what Kafka and other writers put
in a log: skippable frames, the pre-0.10 lz4 header checksum (KAFKA-1493: built with
lz4.frame and patched as old Kafka did, and with kafka-python's legacy encoder), block
and content checksums, block independence; and on damaged frames, which raise
CodecError naming the payload byte at fault (through the registry) and, through
decode(), the batch's position and offset."""
from __future__ import annotations

import random
import struct
import tracemalloc

import pytest

from spark_kafkalog.errors import CodecError
from spark_kafkalog.format import wire
from spark_kafkalog.format.codecs import compress, decompress
from spark_kafkalog.format.decode import decode, decode_run
from tests.format.builders import legacy_message, legacy_set, patch, refresh_crc, rows, \
    v2_batch, v2_record

# oracles, all dev dependencies: a missing one fails the module, it never skips it
import kafka.codec as kcodec  # noqa: E402
import lz4.frame as lz4f  # noqa: E402
import xxhash  # noqa: E402  (the header checksums)

MiB = 1 << 20
LZ4_MAGIC = struct.pack("<I", 0x184D2204)


def _sample(n: int, seed: int = 0) -> bytes:
    rng = random.Random(seed)
    words = [rng.randbytes(rng.randint(1, 12)) for _ in range(64)]
    out = bytearray()
    while len(out) < n:
        out += rng.choice(words)
    return bytes(out[:n])


def _hc(header: bytes) -> int:
    return (xxhash.xxh32(header).intdigest() >> 8) & 0xFF


def _with_descriptor(frame: bytes, flg: int | None = None, bd: int | None = None) -> bytes:
    """``frame`` (no content size) with FLG / BD replaced and a correct header checksum."""
    f = bytearray(frame)
    if flg is not None:
        f[4] = flg
    if bd is not None:
        f[5] = bd
    f[6] = _hc(bytes(f[4:6]))
    return bytes(f)


def _old_kafka(frame: bytes) -> bytes:
    """``frame`` with its header checksum computed as Kafka before 0.10 did: over the
    magic and the descriptor (KAFKA-1493)."""
    f = bytearray(frame)
    hc_pos = 4 + (10 if f[4] & 0x08 else 2)
    f[hc_pos] = _hc(bytes(f[:hc_pos]))
    return bytes(f)


def _skippable(magic_low: int, data: bytes) -> bytes:
    return struct.pack("<II", 0x184D2A50 | magic_low, len(data)) + data


# ---- skippable frames -------------------------------------------------------------------------

def test_skippable_frames_anywhere():
    a, b = _sample(3000, 1), _sample(80_000, 2)
    fa, fb = compress("lz4", a), lz4f.compress(b, content_checksum=True)
    payload = (_skippable(0, b"") + fa + _skippable(0xF, b"meta" * 10) + _skippable(7, b"x")
               + fb + _skippable(1, b"end"))
    assert bytes(decompress(3, payload)) == a + b
    # only skippable frames: nothing
    assert bytes(decompress(3, _skippable(2, b"abc"))) == b""


@pytest.mark.parametrize("tail,match", [
    (struct.pack("<I", 0x184D2A55), "skippable lz4 frame truncated at payload byte {at}"),
    (struct.pack("<II", 0x184D2A55, 10) + b"abc",
     "skippable lz4 frame of 10 bytes at payload byte {at} runs past the end"),
    (b"\x01\x02", "2 stray bytes after the lz4 frame ending at payload byte {at}"),
    (struct.pack("<I", 0x184D2205) + b"\0" * 8, r"not an lz4 frame at payload byte {at} "
                                                r"\(magic 0x184d2205"),
])
def test_bad_frame_after_a_good_one_names_its_byte(tail, match):
    good = compress("lz4", _sample(1000))
    with pytest.raises(CodecError, match=match.format(at=len(good))):
        decompress(3, good + tail)


# ---- Kafka before 0.10: the header checksum over the magic too ----------------------------------

@pytest.mark.parametrize("kw", [dict(), dict(store_size=True), dict(block_checksum=True),
                                dict(content_checksum=True, block_linked=True)])
def test_old_kafka_header_checksum_from_lz4_frame(kw):
    data = _sample(150_000, 3)
    good = lz4f.compress(data, block_size=lz4f.BLOCKSIZE_MAX64KB, **kw)
    old = _old_kafka(good)
    assert old != good
    assert bytes(decompress(3, old, magic=0)) == data
    for magic in (1, 2):       # written by Kafka >= 0.10 (KAFKA-3160): the checksum is checked
        with pytest.raises(CodecError, match="lz4 frame at payload byte 0 has a bad header "
                                             "checksum"):
            decompress(3, old, magic=magic)


def test_old_kafka_header_checksum_from_kafka_python():
    data = _sample(70_000, 4)
    old = kcodec.lz4_encode_old_kafka(data)
    assert old[6] == _hc(old[:6]) != _hc(old[4:6])
    assert bytes(decompress(3, old, magic=0)) == data
    # several old frames and a skippable one: each frame's header is judged on its own
    two = old + _skippable(0, b"") + kcodec.lz4_encode_old_kafka(data[::-1])
    assert bytes(decompress(3, two, magic=0)) == data + data[::-1]
    with pytest.raises(CodecError, match="bad header checksum"):
        decompress(3, compress("lz4", data) + old, magic=1)


def _legacy_lz4_wrapper(value: bytes, *, offset: int, magic: int) -> bytes:
    return legacy_message(offset, None, value, magic=magic, attributes=wire.CODEC_LZ4,
                          timestamp=1_500_000_000_000 if magic else -1)


@pytest.mark.parametrize("encoder", ["lz4.frame", "kafka-python"])
def test_old_kafka_v0_wrapper_through_decode(encoder):
    inner = legacy_set([(10 + i, None, b"k%d" % i, _sample(300, i)) for i in range(5)], magic=0)
    value = (_old_kafka(lz4f.compress(inner, block_linked=False))
             if encoder == "lz4.frame" else kcodec.lz4_encode_old_kafka(inner))
    first = legacy_set([(9, None, b"a", b"b")], magic=0)
    wrapper = _legacy_lz4_wrapper(value, offset=14, magic=0)
    got = rows(decode(first + wrapper))
    assert [(r.offset, r.key) for r in got] == [(9, b"a")] + [(10 + i, b"k%d" % i)
                                                            for i in range(5)]
    # the same frame in a magic 1 wrapper is corrupt, reported at the wrapper
    inner1 = legacy_set([(i, 5, b"k%d" % i, b"v") for i in range(5)], magic=1)
    value1 = _old_kafka(lz4f.compress(inner1, block_linked=False))
    data = first + _legacy_lz4_wrapper(value1, offset=14, magic=1)
    with pytest.raises(CodecError, match="magic 1 lz4 batch: lz4 frame at payload byte 0 "
                                         "has a bad header checksum") as info:
        decode_run(data, position_base=500)
    assert (info.value.position, info.value.offset) == (500 + len(first), 14)


def test_any_other_header_checksum_is_refused_for_magic_0():
    frame = bytearray(compress("lz4", b"hello" * 100))
    for hc in range(256):
        frame[6] = hc
        if hc in (_hc(bytes(frame[4:6])), _hc(bytes(frame[:6]))):
            assert bytes(decompress(3, bytes(frame), magic=0)) == b"hello" * 100
        else:
            with pytest.raises(CodecError, match="bad header checksum"):
                decompress(3, bytes(frame), magic=0)


# ---- frame features -----------------------------------------------------------------------------

def test_block_and_content_checksums_are_verified():
    data = _sample(200_000, 5)
    frame = bytearray(lz4f.compress(data, block_checksum=True, content_checksum=True,
                                    block_size=lz4f.BLOCKSIZE_MAX64KB, block_linked=False,
                                    store_size=False))
    assert bytes(decompress(3, bytes(frame))) == data
    # a flipped byte inside the first block: its checksum says so, at the block's header
    bad = bytearray(frame)
    bad[7 + 4 + 10] ^= 0x01
    with pytest.raises(CodecError, match="lz4 block at payload byte 7 does not match its "
                                         "checksum"):
        decompress(3, bytes(bad))
    # the content checksum (the frame's last 4 bytes)
    bad = bytearray(frame)
    bad[-1] ^= 0x80
    with pytest.raises(CodecError, match="lz4 frame at payload byte 0 does not match its "
                                         "content checksum"):
        decompress(3, bytes(bad))


def test_block_independence_flag():
    # blocks that reference earlier blocks: read when the frame says they are linked ...
    data = _sample(300_000, 6)
    linked = lz4f.compress(data, block_linked=True, block_size=lz4f.BLOCKSIZE_MAX64KB,
                           store_size=False)
    assert not linked[4] & 0x20
    assert bytes(decompress(3, linked)) == data
    # ... and corrupt when the same blocks claim to be independent
    claimed = _with_descriptor(linked, flg=linked[4] | 0x20)
    with pytest.raises(CodecError, match=r"lz4 block at payload byte \d+ is corrupt"):
        decompress(3, claimed)


@pytest.mark.parametrize("flg,bd,match", [
    (0x61, 0x40, "needs a dictionary"),
    (0x62, 0x40, r"sets reserved bits \(FLG 0x62, BD 0x40\)"),
    (0x60, 0x41, r"sets reserved bits \(FLG 0x60, BD 0x41\)"),
    (0x60, 0xC0, "sets reserved bits"),
    (0xA0, 0x40, "has unsupported version 2"),
    (0x60, 0x30, "has invalid block size id 3"),
])
def test_descriptor_checks(flg, bd, match):
    frame = compress("lz4", _sample(1000))
    with pytest.raises(CodecError, match=f"lz4 frame at payload byte 0 {match}"):
        decompress(3, _with_descriptor(frame, flg, bd))


def test_bigger_block_size_ids():
    data = _sample(5 * MiB, 7)
    for size in (lz4f.BLOCKSIZE_MAX256KB, lz4f.BLOCKSIZE_MAX1MB, lz4f.BLOCKSIZE_MAX4MB):
        frame = lz4f.compress(data, block_size=size, block_linked=False)
        assert bytes(decompress(3, frame)) == data
        assert bytes(decompress(3, frame, max_size=len(data))) == data
        with pytest.raises(CodecError, match="more than the limit"):
            decompress(3, frame, max_size=len(data) - 1)


# ---- damaged frames: the error names the byte --------------------------------------------------

def _blocks(frame: bytes) -> list[tuple[int, int]]:
    """(position of the block's size word, block size) of a Kafka-layout frame."""
    out, pos = [], 7
    while True:
        (word,) = struct.unpack_from("<I", frame, pos)
        if word == 0:
            return out
        out.append((pos, word & 0x7FFFFFFF))
        pos += 4 + (word & 0x7FFFFFFF)


def test_truncations_name_the_right_byte():
    data = _sample(150_000, 8)
    lead = compress("lz4", b"lead" * 50)
    frame = compress("lz4", data)
    base = len(lead)
    blocks = _blocks(frame)
    assert len(blocks) == 3
    payload = lead + frame
    cases = [(base + 3, "3 stray bytes after the lz4 frame ending at payload byte {b}"),
             (base + 6, "lz4 frame header truncated at payload byte {b}"),
             (base + 9, "lz4 frame starting at payload byte {b} is truncated"),
             (base + blocks[1][0] + 10,
              f"lz4 block of {blocks[1][1]} bytes at payload byte {base + blocks[1][0]} "
              f"runs past the end"),
             (len(payload) - 1, "lz4 frame starting at payload byte {b} is truncated "
                                r"\(no end mark\)")]
    for cut, match in cases:
        with pytest.raises(CodecError, match=match.format(b=base)):
            decompress(3, payload[:cut])


def test_corrupt_block_and_oversized_block_name_their_bytes():
    data = _sample(150_000, 9)
    frame = bytearray(compress("lz4", data))
    pos, size = _blocks(bytes(frame))[1]
    bad = bytearray(frame)
    struct.pack_into("<I", bad, pos, 64 * 1024 + 1)
    with pytest.raises(CodecError, match=f"lz4 block of 65537 bytes at payload byte {pos} "
                                         f"exceeds the frame's block size 65536"):
        decompress(3, bytes(bad))
    # a match offset pointing before the block (independent blocks)
    bad = bytearray(frame)
    bad[pos + 4:pos + 4 + 4] = bytes([0x00, 0xFF, 0xFF, 0x00])
    with pytest.raises(CodecError, match=f"lz4 block at payload byte {pos} is corrupt"):
        decompress(3, bytes(bad))


def test_declared_content_size_that_does_not_match():
    data = _sample(5000, 10)
    frame = bytearray(lz4f.compress(data, store_size=True, block_linked=False))
    for declared, match in ((4999, "declares a content size of 4999 bytes but holds more"),
                            (5001, "declares a content size of 5001 bytes but holds 5000")):
        frame[6:14] = struct.pack("<Q", declared)
        frame[14] = _hc(bytes(frame[4:14]))
        with pytest.raises(CodecError, match=f"lz4 frame at payload byte 0 {match}"):
            decompress(3, bytes(frame))


def test_damage_through_decode_names_batch_and_payload_byte():
    recs = b"".join(v2_record(i, 0, b"k", _sample(200, i)) for i in range(100))
    frame = compress("lz4", recs)
    first = v2_batch([v2_record(0, 0, b"a", b"b")], base_offset=10)
    pos, _ = _blocks(frame)[0]

    def batch(body):
        b = v2_batch(body, count=100, base_offset=11)
        return refresh_crc(patch(b, wire.V2_ATTRIBUTES_POS, ">h", wire.CODEC_LZ4))

    assert decode(first + batch(frame)).num_rows == 101
    bad = bytearray(frame)
    bad[pos + 4:pos + 8] = bytes([0x00, 0xFF, 0xFF, 0x00])
    for body, match in ((bytes(bad), f"lz4 block at payload byte {pos} is corrupt"),
                        (frame[:-2], "lz4 frame starting at payload byte 0 is truncated"),
                        (frame + b"\0", "1 stray bytes after the lz4 frame")):
        with pytest.raises(CodecError, match=f"magic 2 lz4 batch: {match}") as info:
            decode_run(first + batch(body), position_base=4096)
        assert (info.value.position, info.value.offset) == (4096 + len(first), 11)


# ---- snappy ----------------------------------------------------------------------------------------

def test_snappy_damage_names_the_byte():
    import cramjam
    hdr = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    block = bytes(cramjam.snappy.compress_raw(_sample(20_000)))
    one = struct.pack(">i", len(block)) + block
    cases = [(hdr[:12], "snappy \\(xerial\\) payload is truncated in its 16-byte header"),
             (hdr + one + b"\0\0", f"block length truncated at payload byte {16 + len(one)}"),
             (hdr + one + struct.pack(">i", 99) + b"abc",
              f"block of 99 bytes at payload byte {16 + len(one)} runs past the end"),
             (hdr + one + struct.pack(">i", 5) + b"\xff" * 5,
              f"snappy block at payload byte {16 + len(one) + 4} has a bad "
              f"uncompressed-length header"),
             (hdr + one + struct.pack(">i", 3) + b"\xff\x7f\x00",
              f"snappy block at payload byte {16 + len(one) + 4} declares 16383 bytes, more "
              f"than its 1 bytes can hold"),
             (hdr + one + struct.pack(">i", len(block) - 3) + block[:-3],
              f"snappy block at payload byte {16 + len(one) + 4} is corrupt")]
    for payload, match in cases:
        with pytest.raises(CodecError, match=match):
            decompress(2, payload)


# ---- bounded allocation on hostile frames ----------------------------------------------------------

def test_output_room_is_bounded_by_the_input():
    # 4 MiB blocks of one byte each: the walk's bound is 255 bytes per block, not 4 MiB
    many = b"".join(struct.pack("<I", 1) + b"\x00" for _ in range(10_000))
    frame = LZ4_MAGIC + bytes([0x60, 0x70]) + bytes([_hc(bytes([0x60, 0x70]))]) + many \
        + b"\0\0\0\0"
    tracemalloc.start()
    try:
        assert bytes(decompress(3, frame, max_size=1 << 40)) == b""
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 256 * len(frame) + MiB
    # a raw snappy block declaring far more than its bytes can hold: no allocation
    tracemalloc.start()
    try:
        with pytest.raises(CodecError, match="declares 4294967295 bytes, more than"):
            decompress(2, b"\xff\xff\xff\xff\x0f" + b"\x00" * 1000, max_size=1 << 40)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MiB


# ---- zstd: walked in C, decoded by zstandard -------------------------------------------------------

def test_zstd_frames_walk_agrees_with_zstandard():
    import zstandard
    from spark_kafkalog.format import _decode
    a, b = _sample(1000, 11), _sample(300_000, 12)
    sized = zstandard.ZstdCompressor().compress(a)
    c = zstandard.ZstdCompressor(write_checksum=True).compressobj()
    streamed = c.compress(b) + c.flush()
    skip = _skippable(0xE, b"meta")
    payload = sized + skip + streamed
    frames = _decode.zstd_frames(payload)
    assert [(s, e) for s, e, _, _ in frames] == [
        (0, len(sized)), (len(sized) + len(skip), len(payload))]
    assert frames[0][2] == zstandard.get_frame_parameters(sized).content_size == len(a)
    assert frames[1][2] is None
    assert frames[0][3] >= len(a) and frames[1][3] >= len(b)
    assert bytes(decompress(4, payload)) == a + b


def test_zstd_damage_names_the_byte():
    import zstandard
    good = zstandard.ZstdCompressor().compress(_sample(1000, 13))
    second = zstandard.ZstdCompressor(write_checksum=True).compress(_sample(200_000, 14))
    at = len(good)
    reserved = bytearray(second)
    reserved[4] |= 0x08
    cases = [(good + second[:5], f"zstd frame header truncated at payload byte {at}"),
             (good + second[:-5], r"zstd block at payload byte \d+ runs past the end"),
             (good + second[:9], f"zstd frame starting at payload byte {at} is truncated"),
             (good + second[:-2], f"zstd frame starting at payload byte {at} is truncated "
                                  r"\(checksum\)"),
             (good + bytes(reserved), f"zstd frame at payload byte {at} sets a reserved "
                                      f"header bit"),
             (good + b"\x00\x01", f"2 stray bytes after the zstd frame ending at payload "
                                  f"byte {at}"),
             (good + struct.pack("<I", 0xFD2FB529) + b"\0" * 4,
              f"not a zstd frame at payload byte {at}")]
    for payload, match in cases:
        with pytest.raises(CodecError, match=match):
            decompress(4, payload)

"""The codec registry: round trips, Java wire details, outside oracles (kafka-python's
kafka.codec), hostile payloads and compression bombs."""
from __future__ import annotations

import os
import random
import struct
import sys
import threading
import tracemalloc
import zlib

import pytest

from spark_kafkalog.errors import (
    CodecError,
    InvalidOptionError,
    KafkaLogError,
    MissingCodecError,
    UnsupportedFormatError,
)
from spark_kafkalog.format import codecs
from spark_kafkalog.format.codecs import (
    XERIAL_BLOCK_SIZE,
    XERIAL_MAGIC,
    codec_id,
    compress,
    decompress,
    xxh32,
)
from spark_kafkalog.format.wire import DEFAULT_MAX_DECOMPRESSED
from tests.memutil import peak_rss_kb, reset_peak_rss

kcodec = pytest.importorskip("kafka.codec")

CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
ALL_CODECS = {"none": 0, **CODECS}
MiB = 1 << 20


def _sample(n: int, seed: int = 0) -> bytes:
    """Half-compressible bytes: random words with repeats."""
    rng = random.Random(seed)
    words = [rng.randbytes(rng.randint(1, 12)) for _ in range(64)]
    out = bytearray()
    while len(out) < n:
        out += rng.choice(words)
    return bytes(out[:n])


SIZES = [0, 1, 100, XERIAL_BLOCK_SIZE - 1, XERIAL_BLOCK_SIZE, XERIAL_BLOCK_SIZE + 1,
         64 * 1024, 64 * 1024 + 1, 300_000]


# ---- names ------------------------------------------------------------------------------
def test_codec_id_names():
    assert [codec_id(n) for n in ("none", "gzip", "snappy", "lz4", "zstd")] == [0, 1, 2, 3, 4]
    assert codec_id("ZSTD") == 4
    assert codec_id(3) == 3


@pytest.mark.parametrize("bad", ["lzma", "", "gzip9", 7, -1, None, True])
def test_codec_id_rejects_unknown(bad):
    with pytest.raises(InvalidOptionError) as exc:
        codec_id(bad)
    assert repr(bad) in str(exc.value)


@pytest.mark.parametrize("cid", [5, 6, 7, 99])
def test_unknown_codec_id_is_unsupported(cid):
    with pytest.raises(UnsupportedFormatError, match=f"codec id {cid}"):
        decompress(cid, b"whatever")


# ---- round trips ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(ALL_CODECS))
@pytest.mark.parametrize("size", SIZES)
def test_round_trip(name, size):
    data = _sample(size, seed=size)
    packed = compress(name, data)
    assert bytes(decompress(ALL_CODECS[name], packed)) == data
    assert bytes(decompress(ALL_CODECS[name], memoryview(packed))) == data
    assert bytes(decompress(ALL_CODECS[name], bytearray(packed))) == data
    # a memoryview slice inside a bigger buffer (how the decoder hands payloads over)
    framed = b"xx" + packed + b"yy"
    assert bytes(decompress(ALL_CODECS[name], memoryview(framed)[2:-2])) == data


@pytest.mark.parametrize("name", list(CODECS))
def test_compress_accepts_memoryview_and_levels(name):
    data = _sample(50_000)
    assert bytes(decompress(CODECS[name], compress(CODECS[name], memoryview(data)))) == data
    levels = {"gzip": [1, 9], "lz4": [1, 9, 12], "zstd": [-5, 1, 19], "snappy": []}[name]
    for level in levels:
        assert bytes(decompress(CODECS[name], compress(name, data, level=level))) == data


@pytest.mark.parametrize("name,level", [("gzip", 0), ("gzip", 10), ("lz4", 18), ("lz4", 0),
                                        ("zstd", 23), ("snappy", 1), ("none", 1),
                                        ("gzip", "9")])
def test_bad_level(name, level):
    with pytest.raises(InvalidOptionError):
        compress(name, b"abc", level=level)


@pytest.mark.parametrize("name", list(ALL_CODECS))
def test_max_size_boundary(name):
    data = _sample(70_000)
    packed = compress(name, data)
    assert bytes(decompress(ALL_CODECS[name], packed, max_size=len(data))) == data
    with pytest.raises(CodecError, match="more than the limit"):
        decompress(ALL_CODECS[name], packed, max_size=len(data) - 1)


def test_bad_max_size():
    with pytest.raises(InvalidOptionError):
        decompress(1, compress(1, b"x"), max_size=-1)


# ---- what the Java client writes --------------------------------------------------------------
def test_snappy_is_xerial_framed_in_32k_blocks():
    data = _sample(3 * XERIAL_BLOCK_SIZE + 5)
    packed = compress("snappy", data)
    assert packed[:16] == XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    pos, blocks = 16, 0
    while pos < len(packed):
        (n,) = struct.unpack_from(">i", packed, pos)
        pos += 4 + n
        blocks += 1
    assert pos == len(packed)
    assert blocks == 4


def test_lz4_frame_header_matches_kafka_writer():
    packed = compress("lz4", _sample(200_000))
    # magic, FLG = version 1 | independent blocks, BD = 64 KiB max block
    assert packed[:6] == bytes.fromhex("04224d18") + bytes([0x60, 0x40])
    assert packed[6] == (xxh32(bytes([0x60, 0x40])) >> 8) & 0xFF
    assert packed[-4:] == b"\0\0\0\0"      # end mark, no content checksum
    # every block at most 64 KiB of input: 200_000 bytes need 4 blocks
    pos, blocks = 7, 0
    while True:
        (word,) = struct.unpack_from("<I", packed, pos)
        pos += 4
        if word == 0:
            break
        pos += word & 0x7FFFFFFF
        blocks += 1
    assert blocks == 4 and pos == len(packed)


def test_gzip_is_one_member():
    packed = compress("gzip", _sample(10_000))
    assert packed[:3] == b"\x1f\x8b\x08"
    d = zlib.decompressobj(31)
    d.decompress(packed)
    assert d.eof and d.unused_data == b""


# ---- outside oracle: kafka-python's codec functions, both directions -----------------------
@pytest.mark.parametrize("size", [0, 1, 1000, 100_000, 300_001])
def test_oracle_gzip(size):
    data = _sample(size, seed=3)
    assert kcodec.gzip_decode(compress("gzip", data)) == data
    assert bytes(decompress(1, kcodec.gzip_encode(data))) == data


@pytest.mark.parametrize("size", [1, 1000, 100_000, 300_001])
def test_oracle_snappy(size):
    data = _sample(size, seed=4)
    assert kcodec.snappy_decode(compress("snappy", data)) == data
    assert bytes(decompress(2, kcodec.snappy_encode(data))) == data
    assert bytes(decompress(2, kcodec.snappy_encode(data, xerial_compatible=False))) == data
    assert bytes(decompress(2, kcodec.snappy_encode(data, xerial_blocksize=1000))) == data


@pytest.mark.parametrize("size", [0, 1, 1000, 100_000, 300_001])
def test_oracle_lz4(size):
    data = _sample(size, seed=5)
    assert kcodec.lz4_decode(compress("lz4", data)) == data
    # kafka-python writes the content size; readers must skip it
    assert bytes(decompress(3, kcodec.lz4_encode(data))) == data


@pytest.mark.parametrize("size", [0, 1, 1000, 100_000, 300_001])
def test_oracle_zstd(size):
    data = _sample(size, seed=6)
    assert kcodec.zstd_decode(compress("zstd", data)) == data
    assert bytes(decompress(4, kcodec.zstd_encode(data))) == data


# ---- lz4: the pre-0.10 broken header checksum ------------------------------------------------
@pytest.mark.parametrize("size", [1, 1000, 200_000])
def test_lz4_old_kafka_broken_checksum(size):
    pytest.importorskip("xxhash")
    data = _sample(size, seed=7)
    broken = kcodec.lz4_encode_old_kafka(data)
    assert broken[6] != compress("lz4", data)[6] or size == 0  # really a different HC byte
    assert bytes(decompress(3, broken, magic=0)) == data
    # magic 1 and 2 data was written with the correct checksum: no patching there
    for magic in (1, 2):
        with pytest.raises(CodecError):
            decompress(3, broken, magic=magic)
    # the fixed format still decodes under magic 0 (newer clients writing v0)
    assert bytes(decompress(3, compress("lz4", data), magic=0)) == data
    # and kafka-python's old-kafka decoder reads our correct frames
    assert kcodec.lz4_decode_old_kafka(kcodec.lz4_encode_old_kafka(data)) == data


def test_lz4_broken_checksum_with_content_size():
    import lz4.frame as lz4f
    data = _sample(5000)
    frame = bytearray(lz4f.compress(data, store_size=True, block_linked=False))
    hc_pos = 4 + 2 + 8
    frame[hc_pos] = (xxh32(bytes(frame[:hc_pos])) >> 8) & 0xFF   # KAFKA-1493 style
    assert bytes(decompress(3, bytes(frame), magic=0)) == data
    with pytest.raises(CodecError):
        decompress(3, bytes(frame), magic=2)


def _lz4_frame_declaring(data: bytes, declared: int) -> bytes:
    """An lz4 frame of ``data`` whose header's content-size field says ``declared``
    (header checksum recomputed, so only the size is wrong)."""
    import lz4.frame as lz4f
    frame = bytearray(lz4f.compress(data, store_size=True, block_linked=False))
    frame[6:14] = struct.pack("<Q", declared)
    frame[14] = (xxh32(bytes(frame[4:14])) >> 8) & 0xFF
    return bytes(frame)


@pytest.mark.parametrize("declared", [2 ** 59, 2 ** 64 - 1, 64 * 1024 + 1])
def test_lz4_declared_content_size_checked_before_the_library(declared):
    # A declared size beyond what the frame's blocks can hold is corrupt; it must be
    # refused before lz4 sizes an output buffer from it (it used to try 2**59 bytes).
    frame = _lz4_frame_declaring(b"abc" * 100, declared)
    tracemalloc.start()
    try:
        with pytest.raises(CodecError, match="declares a content size"):
            decompress(3, frame)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MiB


def test_lz4_declared_content_size_past_budget():
    frame = _lz4_frame_declaring(b"abc" * 100, 60_000)      # fits the blocks' capacity
    with pytest.raises(CodecError, match="more than the limit of 1000"):
        decompress(3, frame, max_size=1000)
    # the frame is still checked against its real content by the library
    with pytest.raises(CodecError):
        decompress(3, frame)
    assert bytes(decompress(3, _lz4_frame_declaring(b"abc" * 100, 300))) == b"abc" * 100


def test_lz4_other_bad_checksum_still_rejected_for_magic0():
    frame = bytearray(compress("lz4", b"hello" * 100))
    correct = frame[6]
    broken = (xxh32(bytes(frame[:6])) >> 8) & 0xFF
    frame[6] = next(b for b in range(256) if b not in (correct, broken))
    with pytest.raises(CodecError):
        decompress(3, bytes(frame), magic=0)


def test_lz4_concatenated_and_skippable_frames():
    a, b = _sample(1000, 1), _sample(70_000, 2)
    skippable = struct.pack("<II", 0x184D2A53, 3) + b"abc"
    payload = compress("lz4", a) + skippable + compress("lz4", b)
    assert bytes(decompress(3, payload)) == a + b


def test_xxh32_matches_reference():
    xxhash = pytest.importorskip("xxhash")
    rng = random.Random(11)
    for n in list(range(0, 70)) + [1000, 4097]:
        data = rng.randbytes(n)
        assert xxh32(data) == xxhash.xxh32(data).intdigest(), n
    assert xxh32(b"abc", seed=7) == xxhash.xxh32(b"abc", seed=7).intdigest()
    assert xxh32(b"") == 0x02CC5D05


# ---- snappy framing variants ---------------------------------------------------------------
def _xerial(blocks, header_ints=struct.pack(">ii", 1, 1)):
    import cramjam
    out = bytearray(XERIAL_MAGIC + header_ints)
    for block in blocks:
        raw = bytes(cramjam.snappy.compress_raw(block))
        out += struct.pack(">i", len(raw)) + raw
    return bytes(out)


def test_snappy_little_endian_xerial_header():
    parts = [_sample(1000, 1), _sample(40_000, 2), b""]
    for ints in (struct.pack("<ii", 1, 1), struct.pack(">ii", 7, 3), b"\xff" * 8):
        assert bytes(decompress(2, _xerial(parts, ints))) == b"".join(parts)


def test_snappy_raw_block_without_framing():
    import cramjam
    data = _sample(100_000)
    assert bytes(decompress(2, bytes(cramjam.snappy.compress_raw(data)))) == data


def test_snappy_xerial_header_only_is_empty():
    assert bytes(decompress(2, XERIAL_MAGIC + struct.pack(">ii", 1, 1))) == b""


# ---- zstd frame variants ---------------------------------------------------------------------
def _zstd_streamed(data: bytes, **kw) -> bytes:
    import zstandard
    c = zstandard.ZstdCompressor(**kw).compressobj()
    return c.compress(data) + c.flush()


def test_zstd_frames_with_and_without_content_size_back_to_back():
    import zstandard
    a, b, c = _sample(1000, 1), _sample(300_000, 2), _sample(10, 3)
    streamed = _zstd_streamed(b, write_checksum=True)
    assert zstandard.get_frame_parameters(streamed).content_size == 2 ** 64 - 1
    skippable = struct.pack("<II", 0x184D2A5E, 4) + b"meta"
    payload = compress("zstd", a) + streamed + skippable + _zstd_streamed(c)
    assert bytes(decompress(4, payload)) == a + b + c
    assert bytes(decompress(4, streamed)) == b


def test_zstd_streamed_frame_at_exact_budget():
    data = _sample(400_000)
    packed = _zstd_streamed(data)
    assert bytes(decompress(4, packed, max_size=len(data))) == data
    with pytest.raises(CodecError, match="more than the limit"):
        decompress(4, packed, max_size=len(data) - 1)


# ---- gzip members -------------------------------------------------------------------------------
def test_gzip_concatenated_members_and_trailing_bytes():
    a, b = _sample(1000, 1), _sample(50_000, 2)
    payload = compress("gzip", a) + compress("gzip", b)
    assert bytes(decompress(1, payload)) == a + b
    # bytes that do not start a new member are ignored, as GZIPInputStream does
    assert bytes(decompress(1, payload + b"\0\0junk")) == a + b


# ---- hostile input ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(CODECS))
def test_empty_payload(name):
    with pytest.raises(CodecError):
        decompress(CODECS[name], b"")


@pytest.mark.parametrize("name", list(CODECS))
def test_truncations(name):
    data = _sample(100_000, seed=9)
    packed = compress(name, data)
    cuts = sorted(set(range(0, 40)) | set(range(0, len(packed), max(1, len(packed) // 300)))
                  | {len(packed) - k for k in range(1, 10)})
    for cut in cuts:
        if not 0 <= cut < len(packed):
            continue
        try:
            out = bytes(decompress(CODECS[name], packed[:cut]))
        except CodecError:
            continue
        # only xerial snappy can end cleanly at a block boundary: a strict prefix
        assert name == "snappy" and data.startswith(out) and len(out) < len(data), cut


@pytest.mark.parametrize("name", list(CODECS))
def test_garbage_and_bit_flips_raise_only_codec_error(name):
    rng = random.Random(1234)
    data = _sample(20_000, seed=10)
    packed = compress(name, data)
    for i in range(400):
        if i % 4 == 0:
            bad = rng.randbytes(rng.randint(0, 200))
        elif i % 4 == 1:   # keep the codec's magic so the payload gets past the first check
            bad = packed[:8] + rng.randbytes(rng.randint(0, 300))
        else:
            bad = bytearray(packed)
            for _ in range(rng.randint(1, 4)):
                bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
            bad = bytes(bad)
        try:
            out = decompress(CODECS[name], bad, max_size=4 * MiB)
        except CodecError:
            continue
        assert len(out) <= 4 * MiB


def test_snappy_hostile_lengths():
    # block length past the end, negative block length, varint never terminating
    hdr = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    for bad in (hdr + struct.pack(">i", 1000) + b"abc",
                hdr + struct.pack(">i", -5) + b"abc",
                hdr + b"\x00\x00",
                hdr[:12],
                b"\xff\xff\xff\xff\xff\xff",
                hdr + struct.pack(">i", 6) + b"\xff\xff\xff\xff\xff\xff"):
        with pytest.raises(CodecError):
            decompress(2, bad)


def test_errors_belong_to_the_hierarchy():
    with pytest.raises(KafkaLogError):
        decompress(4, b"\x28\xb5\x2f\xfd garbage")


# ---- compression bombs --------------------------------------------------------------------------
GiB = 1 << 30


@pytest.fixture(scope="module")
def bombs():
    """Payloads that each decompress to 1 GiB (or declare that they do), built without
    ever holding 1 GiB."""
    import cramjam
    import lz4.frame as lz4f
    import zstandard
    zeros = bytes(MiB)
    out = {}
    member = zlib.compressobj(1, zlib.DEFLATED, 31)
    out["gzip members"] = (1, (member.compress(zeros) + member.flush()) * 1024)
    big = zlib.compressobj(1, zlib.DEFLATED, 31)
    out["gzip one member 64MiB"] = (1, b"".join(big.compress(zeros) for _ in range(64))
                                    + big.flush())
    c = lz4f.LZ4FrameCompressor(block_size=lz4f.BLOCKSIZE_MAX64KB, block_linked=False)
    out["lz4 one frame"] = (3, c.begin() + b"".join(c.compress(zeros) for _ in range(1024))
                            + c.flush())
    out["lz4 frames"] = (3, compress("lz4", zeros) * 1024)
    z = zstandard.ZstdCompressor(level=1).compressobj()
    out["zstd one frame, no size"] = (4, b"".join(z.compress(zeros) for _ in range(1024))
                                      + z.flush())
    out["zstd frames with size"] = (4, compress("zstd", zeros) * 1024)
    block = bytes(cramjam.snappy.compress_raw(bytes(64 * MiB)))
    out["snappy xerial"] = (2, XERIAL_MAGIC + struct.pack(">ii", 1, 1)
                            + (struct.pack(">i", len(block)) + block) * 16)
    # a raw block declaring 1 GiB: only the declared length matters
    varint = bytearray()
    n = GiB
    while n >= 0x80:
        varint.append((n & 0x7F) | 0x80)
        n >>= 7
    varint.append(n)
    out["snappy raw"] = (2, bytes(varint) + block)
    return out


@pytest.mark.parametrize("which", ["gzip members", "gzip one member 64MiB", "lz4 one frame",
                                   "lz4 frames", "zstd one frame, no size",
                                   "zstd frames with size", "snappy xerial", "snappy raw"])
def test_bomb_fails_within_bounded_memory(bombs, which):
    cid, payload = bombs[which]
    limit = 8 * MiB
    reset_peak_rss()
    rss_before = peak_rss_kb()
    tracemalloc.start()
    try:
        with pytest.raises(CodecError, match="more than the limit"):
            decompress(cid, payload, max_size=limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    rss_after = peak_rss_kb()
    # Python-level allocations: the output budget plus the payload-sized copies at most
    assert peak < 2 * limit + 2 * len(payload) + MiB, peak
    # and nothing (C allocations included) touched anything near 1 GiB
    assert (rss_after - rss_before) * 1024 < 256 * MiB


def test_bomb_against_default_limit(bombs):
    cid, payload = bombs["snappy xerial"]
    with pytest.raises(CodecError, match=str(DEFAULT_MAX_DECOMPRESSED)):
        decompress(cid, payload)


# ---- missing libraries ---------------------------------------------------------------------------
@pytest.mark.parametrize("name,module,pip", [("zstd", "zstandard", "zstandard"),
                                              ("lz4", "lz4.frame", "lz4"),
                                              ("snappy", "cramjam", "cramjam")])
def test_missing_codec_names_the_package(monkeypatch, name, module, pip):
    data = _sample(70_000)
    packed = compress(name, data)          # made before the library "goes missing"
    monkeypatch.setattr(codecs, "_modules", {})
    monkeypatch.setattr(codecs, "_local", threading.local())   # drop cached compressors
    monkeypatch.setitem(sys.modules, module, None)     # makes `import module` fail
    with pytest.raises(MissingCodecError, match=f"pip install {pip}"):
        compress(name, b"abc")
    if name == "zstd":
        with pytest.raises(MissingCodecError, match=f"pip install {pip}"):
            decompress(CODECS[name], b"abcdefgh")
    else:
        # lz4 frames and snappy are read by the kernel's C framing: no library needed
        assert bytes(decompress(CODECS[name], packed)) == data
        with pytest.raises(CodecError):
            decompress(CODECS[name], b"abcdefgh")


def test_compressor_is_per_thread_and_matches_compress():
    data = _sample(100_000)
    fns = {}

    def grab():
        fns["other"] = codecs.compressor("zstd")
    t = threading.Thread(target=grab)
    t.start()
    t.join()
    mine = codecs.compressor("zstd")
    assert mine is codecs.compressor(4)             # cached in this thread
    assert mine is not fns["other"]                 # a zstd context per thread
    for name in ALL_CODECS:
        assert codecs.compressor(name)(data) == compress(name, data)


def test_none_codec_is_identity_and_bounded():
    assert decompress(0, memoryview(b"abc")) == b"abc"
    assert compress("none", b"abc") == b"abc"
    with pytest.raises(CodecError):
        decompress(0, b"abcd", max_size=3)


def test_random_round_trips():
    rng = random.Random(77)
    for _ in range(60):
        name = rng.choice(list(ALL_CODECS))
        data = os.urandom(rng.randint(0, 5000)) if rng.random() < 0.3 else \
            _sample(rng.randint(0, 200_000), seed=rng.randrange(1000))
        assert bytes(decompress(ALL_CODECS[name], compress(name, data))) == data


# ---- payloads written by real Java clients/brokers ---------------------------------------------
def _fixture(path: str) -> bytes:
    from tests.conftest import require_real_broker
    return (require_real_broker() / path).read_bytes()


def _v2_payloads(data: bytes):
    pos = 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        batch = data[pos:pos + 12 + length]
        (attributes,) = struct.unpack_from(">h", batch, 21)
        yield attributes & 7, batch[61:]
        pos += 12 + length


def _v0_wrapper_value(data: bytes):
    _, _, _, magic, attributes = struct.unpack_from(">qiIbb", data, 0)
    (klen,) = struct.unpack_from(">i", data, 18)
    pos = 22 + max(klen, 0)
    (vlen,) = struct.unpack_from(">i", data, pos)
    return magic, attributes & 7, data[pos + 4:pos + 4 + vlen]


def test_java_client_snappy_batches():
    """Kafka 2.8 broker log, snappy v2 batches written by the Java producer
    (snappy-java's SnappyOutputStream): we decode them as kafka-python does, and our
    xerial header is byte-for-byte the Java one."""
    data = _fixture("seanorth-kafka-server/some-topic-0/00000000000000000000.log")
    payloads = list(_v2_payloads(data))
    assert len(payloads) == 9
    for cid, payload in payloads:
        assert cid == 2
        assert bytes(decompress(2, payload)) == kcodec.snappy_decode(payload)
        assert compress("snappy", b"x")[:16] == payload[:16]


@pytest.mark.parametrize("name,codec", [("fetch1.mytopic.1p.gzip.kafka.0821-0", 1),
                                        ("fetch1.mytopic.1p.snappy.kafka.0821-0", 2),
                                        ("fetch1.mytopic.1p.snappy.kafka.0822-0", 2)])
def test_kafka_08_wrapper_payloads(name, codec):
    data = _fixture(f"kafka-rust-testdata/{name}/00000000000000000000.log")
    magic, cid, value = _v0_wrapper_value(data)
    assert (magic, cid) == (0, codec)
    oracle = kcodec.gzip_decode(value) if codec == 1 else kcodec.snappy_decode(value)
    assert bytes(decompress(codec, value, magic=0)) == oracle
    assert len(oracle) > 1000

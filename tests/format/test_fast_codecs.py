"""The kernel's own C paths: CRC-32C (SSE4.2) and the LZ4-frame / snappy framings
(``_framing.h``, the only decoder of both) that decompress straight into a scratch
buffer. Oracles: the crc32c package and the lz4 / cramjam libraries, on random data of
many sizes and on hostile (mutated) payloads."""
from __future__ import annotations

import random
import re
import struct

import pytest

from spark_kafkalog.errors import CodecError, UnsupportedFormatError
from spark_kafkalog.format import _decode as kernel
from spark_kafkalog.format.codecs import compress, decompress

crc32c = pytest.importorskip("crc32c")
lz4f = pytest.importorskip("lz4.frame")
cramjam = pytest.importorskip("cramjam")

SIZES = [0, 1, 2, 7, 15, 16, 17, 31, 64, 100, 1000, 4095, 16384, 65535, 65536, 65537,
         200_000]
BIG = 1 << 30


def _sample(n: int, rng: random.Random) -> bytes:
    words = [rng.randbytes(rng.randint(1, 12)) for _ in range(64)]
    out = bytearray()
    while len(out) < n:
        out += rng.choice(words)
    return bytes(out[:n])


def _datasets(n: int, seed: int):
    rng = random.Random(seed)
    yield _sample(n, rng)
    yield rng.randbytes(n)
    yield bytes(n)
    yield (b"abc" * (n // 3 + 1))[:n]
    # short periods (match offsets 1..7 overlap their own output)
    yield bytes(rng.randbytes(rng.randint(1, 7)) * (n // 2 + 1))[:n]


def test_crc32c_every_short_length_and_alignment():
    # 0..600 covers the crc32-instruction path (< 256 bytes), the switch to carry-less
    # folding and its 64- and 16-byte tails
    rng = random.Random(1)
    buf = rng.randbytes(620)
    for n in range(0, 601):
        for start in range(0, 8):
            data = buf[start:start + n]
            assert kernel.crc32c(data) == crc32c.crc32c(data), (n, start)


@pytest.mark.parametrize("n", [767, 768, 769, 6143, 6144, 6145, 16384, 100_003, 1 << 20,
                               (1 << 20) + 37])
def test_crc32c_long(n):
    """Long buffers (the folding path's main loop), at several alignments."""
    data = random.Random(n).randbytes(n + 3)
    for start in range(4):
        assert kernel.crc32c(data[start:start + n]) == crc32c.crc32c(data[start:start + n])


def _lz4_frames(d: bytes):
    from aiokafka.codec import lz4_encode
    yield compress("lz4", d)                  # Kafka's layout: independent, no checksums
    yield lz4_encode(d)                       # aiokafka: block checksums
    yield lz4f.compress(d)                    # python-lz4 defaults: linked, sized
    yield lz4f.compress(d, content_checksum=True, block_checksum=True,
                        block_size=lz4f.BLOCKSIZE_MAX64KB)
    yield lz4f.compress(d, block_linked=False, store_size=True, compression_level=9)
    yield compress("lz4", d) + compress("lz4", d[::-1])      # two frames


def _snappy_payloads(d: bytes):
    from aiokafka.codec import snappy_encode
    yield compress("snappy", d)               # xerial, 32 KiB blocks
    yield snappy_encode(d)
    yield bytes(cramjam.snappy.compress_raw(d))


@pytest.mark.parametrize("n", SIZES)
def test_lz4_matches_library(n):
    for d in _datasets(n, n):
        for frame in _lz4_frames(d):
            assert kernel.decompress_framed(3, frame, BIG) == lz4_decode_all(frame)


@pytest.mark.parametrize("n", SIZES)
def test_snappy_matches_library(n):
    for d in _datasets(n, n):
        for payload in _snappy_payloads(d):
            assert kernel.decompress_framed(2, payload, BIG) == d


def lz4_decode_all(payload: bytes) -> bytes:
    """The lz4 library's reading of a payload of frames (skippable ones included);
    raises RuntimeError (the library's error) when a frame is incomplete."""
    out = b""
    while payload:
        d = lz4f.LZ4FrameDecompressor()
        out += d.decompress(payload)
        if not d.eof:
            raise RuntimeError("lz4 frame is incomplete")
        payload = d.unused_data
    return out


def snappy_decode_library(payload: bytes) -> bytes:
    """cramjam's reading of a snappy payload, the xerial framing cut with struct."""
    if payload[:8] != b"\x82SNAPPY\x00":
        return bytes(cramjam.snappy.decompress_raw(payload))
    if len(payload) < 16:
        raise ValueError("xerial header truncated")
    out, pos = b"", 16
    while pos < len(payload):
        (n,) = struct.unpack_from(">i", payload, pos)
        if n < 0 or pos + 4 + n > len(payload):
            raise ValueError("xerial block past the end")
        out += bytes(cramjam.snappy.decompress_raw(payload[pos + 4:pos + 4 + n]))
        pos += 4 + n
    return out


def test_every_frame_feature_is_read_in_c():
    d = _sample(5000, random.Random(3))
    frame = bytearray(compress("lz4", d))
    # Kafka's pre-0.10 header checksum, admitted for magic 0 only
    from spark_kafkalog.format.codecs import xxh32
    frame[6] = (xxh32(bytes(frame[:6])) >> 8) & 0xFF
    assert kernel.decompress_framed(3, bytes(frame), BIG, 0) == d
    with pytest.raises(CodecError, match="bad header checksum"):
        kernel.decompress_framed(3, bytes(frame), BIG, 1)
    # skippable frames, before, between and after
    skippable = struct.pack("<II", 0x184D2A50, 0)
    payload = skippable + compress("lz4", d) + struct.pack("<II", 0x184D2A5F, 2) + b"xy" \
        + compress("lz4", d) + skippable
    assert kernel.decompress_framed(3, payload, BIG) == d + d == lz4_decode_all(payload)
    # the budget: an lz4 output bound past it decodes until the output passes it
    assert kernel.decompress_framed(3, compress("lz4", d), 5000) == d
    with pytest.raises(CodecError, match="more than the limit of 4999"):
        kernel.decompress_framed(3, compress("lz4", d), 4999)
    with pytest.raises(CodecError, match="more than the limit of 4999"):
        kernel.decompress_framed(2, compress("snappy", d), 4999)
    assert kernel.decompress_framed(2, compress("snappy", d), 5000) == d
    # other codecs are not framed in C
    with pytest.raises(UnsupportedFormatError):
        kernel.decompress_framed(1, compress("gzip", d), BIG)


def _mutants(payload: bytes, rng: random.Random, count: int):
    for _ in range(count):
        b = bytearray(payload)
        kind = rng.randrange(4)
        if kind == 0 and b:
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif kind == 1 and b:
            del b[rng.randrange(len(b)):]
        elif kind == 2 and b:
            i = rng.randrange(len(b))
            b[i:i + 4] = rng.randbytes(4)
        else:
            b += rng.randbytes(rng.randint(1, 8))
        yield bytes(b)


@pytest.mark.parametrize("codec", [2, 3])
def test_hostile_payloads_never_disagree_with_the_library(codec):
    """A mutated payload is either decoded by the C framing to exactly what the library
    gives, or refused with CodecError (never another error, never past the budget); the
    library must refuse it too, except where the C reader is stricter (the LZ4
    dictionary-id and reserved bits, which Kafka's reader refuses as well)."""
    rng = random.Random(codec)
    oracle = lz4_decode_all if codec == 3 else snappy_decode_library
    bases = []
    for n in (0, 40, 300, 5000, 70_000):
        d = _sample(n, rng)
        bases += list(_lz4_frames(d) if codec == 3 else _snappy_payloads(d))
    seen_ok = seen_refused = 0
    for base in bases:
        for m in _mutants(base, rng, 400):
            try:
                expected = oracle(m)
            except Exception:                  # the library's own error types
                expected = None
            try:
                got = bytes(kernel.decompress_framed(codec, m, 1 << 20))
            except CodecError as err:
                got = None
                reason = err.reason
            if got is not None:
                seen_ok += 1
                assert got == expected
            else:
                seen_refused += 1
                if expected is not None and len(expected) <= 1 << 20:
                    assert _stricter_than_the_library(m, reason), (reason, m)
    assert seen_ok and seen_refused


def _stricter_than_the_library(payload: bytes, reason: str) -> bool:
    """Where the C reader refuses what the lz4 library reads: an empty payload, reserved
    bits and dictionary ids (Kafka's reader refuses both), and a match offset of 0 (the
    block format calls it corrupt; the library copies from its own output position)."""
    if reason in ("lz4 payload is empty",) or "reserved bits" in reason \
            or "dictionary" in reason:
        return True
    found = re.fullmatch(r"lz4 block at payload byte (\d+) is corrupt", reason)
    if not found:
        return False
    at = int(found.group(1))
    (word,) = struct.unpack_from("<I", payload, at)
    return _has_zero_offset(payload[at + 4:at + 4 + (word & 0x7FFFFFFF)])


def _has_zero_offset(block: bytes) -> bool:
    """Does this LZ4 block's sequence walk reach a match offset of 0 (a reading of the
    block format, independent of the kernel)?"""
    ip = 0
    try:
        while True:
            token = block[ip]
            ip += 1
            lit = token >> 4
            if lit == 15:
                while True:
                    lit += block[ip]
                    ip += 1
                    if block[ip - 1] != 255:
                        break
            ip += lit
            if ip >= len(block):
                return False
            if block[ip] | block[ip + 1] << 8 == 0:
                return True
            ip += 2
            if token & 15 == 15:
                while block[ip] == 255:
                    ip += 1
                ip += 1
    except IndexError:
        return False


# ---- through decode(): the kernel's codec paths end to end ----------------------------------

def _records_payload(n: int) -> tuple[bytes, list]:
    from tests.format.builders import v2_record
    recs = [(i, 1000 + i, b"k%d" % i, _sample(50 + i % 70, random.Random(i))) for i in range(n)]
    return b"".join(v2_record(o, ts - 1000, k, v) for o, ts, k, v in recs), recs


def _batch_around(body: bytes, codec: int, count: int, base_offset: int = 0) -> bytes:
    """A v2 batch whose payload is ``body`` as given (already compressed with ``codec``)."""
    import crc32c as _crc
    from tests.format.builders import v2_batch
    from spark_kafkalog.format import wire
    batch = bytearray(v2_batch(body, count=count, base_offset=base_offset,
                               base_timestamp=1000))
    struct.pack_into(">h", batch, wire.V2_ATTRIBUTES_POS, codec)
    struct.pack_into(">I", batch, wire.V2_CRC_POS,
                     _crc.crc32c(bytes(batch[wire.V2_ATTRIBUTES_POS:])))
    return bytes(batch)


@pytest.mark.parametrize("codec", [2, 3, 4])
def test_decode_through_fast_paths(codec):
    from tests.format.builders import rows
    from spark_kafkalog.format import decode
    payload, recs = _records_payload(300)
    for body in (compress(codec, payload),
                 lz4f.compress(payload) if codec == 3 else
                 bytes(cramjam.snappy.compress_raw(payload)) if codec == 2 else
                 compress(codec, payload[:1000]) + compress(codec, payload[1000:])):
        got = rows(decode(_batch_around(body, codec, len(recs))))
        assert [(r.offset, r.key, r.value) for r in got] == [(o, k, v) for o, _, k, v in recs]


def test_zstd_declared_size_past_budget_names_the_batch():
    import zstandard
    from spark_kafkalog.format import decode
    payload, recs = _records_payload(50)
    frame = zstandard.ZstdCompressor(write_content_size=True).compress(payload)
    data = _batch_around(frame, 4, len(recs), base_offset=77)
    with pytest.raises(CodecError) as info:
        decode(data, max_decompressed_bytes=len(payload) - 1)
    assert info.value.offset == 77 and info.value.position == 0
    assert len(decode(data, max_decompressed_bytes=len(payload))) == len(recs)
    # a truncated frame goes to the registry, which reports the corruption
    with pytest.raises(CodecError) as info:
        decode(_batch_around(frame[:-1], 4, len(recs), base_offset=77))
    assert info.value.offset == 77

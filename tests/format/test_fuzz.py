"""Hostile input: fuzzed record batches give only our own errors.

Every fuzz case takes one valid seed buffer (v2 batches of every codec, control,
transactional, empty, LogAppendTime and delete-horizon batches, legacy v0/v1 messages
and compressed wrappers, mixed-magic segments, compression bombs inside otherwise valid
batches) and mutates it: bit flips, byte replacements, truncations at every kind of
boundary (batch starts, every header field, every record varint, ±1), hostile header
fields (lengths, record counts, magics, every codec id and attribute bit), hostile
varints spliced into records, mutations of the *decompressed* records re-compressed into
a batch with a correct CRC, and splices of several batches. Half the cases get their CRCs
recomputed after mutation so that verify_crc=True reaches the parser too.

Each case is fed to ``decode`` (CRC on/off, headers on/off, a 1 MiB decompression cap),
``scan_headers`` (must never raise for bad data), and for a share of cases to
``decode_run`` and ``read_batch_header``. The only acceptable outcomes are a valid Arrow
batch (checked with ``validate(full=True)``) or a :class:`KafkaLogError` subclass whose
``position`` lies inside the input; ``scan_headers`` must keep its contract (contiguous
rows, ``end``, ``problem`` exactly when the data does not end at a batch end). Apart
from that, whatever ``decode`` accepts ``scan_headers`` must accept too (separate test:
the log layer scans with one and reads with the other).

The loop runs in a subprocess (this file is also its entry point) so that a segfault,
an abort or a hang is a failed test naming the seed and case number, not a dead pytest.
The child runs under an address-space limit (an unbounded allocation becomes a
MemoryError, reported as a failure) and reports Arrow's peak pool allocation and its
peak RSS. Reproduce one case with::

    .venv/bin/python tests/format/test_fuzz.py --seed S --start CASE --count 1 --verbose

Cases are numbered; case ``i`` depends only on ``(seed, i)``. One case in four is an
exhaustive sweep item (every truncation point of every small seed, every header byte set
to every interesting value), the rest are random mutations.
"""
from __future__ import annotations

import argparse
import faulthandler
import gzip
import json
import mmap
import os
import random
import resource
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import zlib

FUZZ_SEED = 20240611
MAX_DECOMPRESSED = 1 << 20          # the cap every fuzz decode runs with
ADDRESS_SPACE_LIMIT = 3 << 30       # child's RLIMIT_AS: a runaway allocation fails fast
ARROW_PEAK_LIMIT = 64 << 20         # Arrow pool peak allowed in the child
RSS_GROWTH_LIMIT_KB = 256 << 10     # peak RSS growth allowed in the child (KiB)
HANG_SECONDS = 10.0                 # no progress for this long (wall): a hang
CASE_CPU_LIMIT = 2.0                # one input of a few KiB taking this much CPU: a bug
                                    # (the worst legitimate case, a capped bomb, ~10 ms)

# ---------------------------------------------------------------------------------------
# seed construction (independent of spark_kafkalog: kafka-python's builders and codecs,
# plus a few hand-built batches for what clients never write)
# ---------------------------------------------------------------------------------------

#: (offset, struct format) of every header field, as in spark_kafkalog.format.wire
V2_FIELDS = [(0, "q"), (8, "i"), (12, "i"), (16, "b"), (17, "I"), (21, "h"), (23, "i"),
             (27, "q"), (35, "q"), (43, "q"), (51, "h"), (53, "i"), (57, "i")]
LEGACY_V0_FIELDS = [(0, "q"), (8, "i"), (12, "I"), (16, "b"), (17, "b"), (18, "i")]
LEGACY_V1_FIELDS = [(0, "q"), (8, "i"), (12, "I"), (16, "b"), (17, "b"), (18, "q"),
                    (26, "i")]

INTERESTING = {
    "b": [0, 1, 2, 3, 4, -1, 127, -128, 0x08, 0x10, 0x20, 0x40, 0x07, 0x05],
    "h": [0, 1, 2, 3, 4, 5, 6, 7, -1, 0x08, 0x10, 0x20, 0x30, 0x40, 0x7FFF, -0x8000, 0x0F],
    "i": [0, 1, -1, 2, 7, 8, 9, 13, 14, 21, 22, 48, 49, 50, 60, 61, 62, 0x7FFF, 0xFFFF,
          1 << 24, (1 << 31) - 1, -(1 << 31), (1 << 30)],
    "I": [0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000],
    "q": [0, 1, -1, -2, (1 << 63) - 1, -(1 << 63), (1 << 31), (1 << 31) - 1, 1 << 40],
}

HOSTILE_VARINTS = [
    b"\x00", b"\x01", b"\x02", b"\x03", b"\x7f", b"\x80\x01",
    b"\xfe\xff\xff\xff\x0f",                      # INT32_MAX
    b"\xff\xff\xff\xff\x0f",                      # INT32_MIN
    b"\xfe\xff\xff\xff\x07",                      # 2**30 - 1
    b"\x80\x80\x80\x80\x10",                      # fifth byte past 32 bits
    b"\x80\x80\x80\x80\x80\x00",                  # 6 bytes: too long for a varint
    b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # INT64_MAX (varlong)
    b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # INT64_MIN (varlong)
    b"\x80" * 10 + b"\x00",                       # 11 bytes: too long for a varlong
    b"\xff" * 12,                                 # never terminates
    b"\x80",                                      # continuation, then whatever follows
]


def _zigzag_varint(value: int) -> bytes:
    z = (value << 1) ^ (value >> 63)
    z &= (1 << 64) - 1
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _read_varint(buf, pos: int):
    """Zig-zag varint at ``pos`` -> (value, next position); for walking *valid* seeds."""
    shift = 0
    acc = 0
    while True:
        b = buf[pos]
        pos += 1
        acc |= (b & 0x7F) << shift
        if not b & 0x80:
            return (acc >> 1) ^ -(acc & 1), pos
        shift += 7


def v2_record(offset_delta: int, ts_delta: int, key, value, headers=()) -> bytes:
    body = bytearray(b"\x00")
    body += _zigzag_varint(ts_delta) + _zigzag_varint(offset_delta)
    for field in (key, value):
        if field is None:
            body += _zigzag_varint(-1)
        else:
            body += _zigzag_varint(len(field)) + field
    body += _zigzag_varint(len(headers))
    for hk, hv in headers:
        hk = hk.encode()
        body += _zigzag_varint(len(hk)) + hk
        body += _zigzag_varint(-1) if hv is None else _zigzag_varint(len(hv)) + hv
    return _zigzag_varint(len(body)) + bytes(body)


def library_compress(codec: int, data: bytes, magic: int = 2) -> bytes:
    """Compress with the codec libraries through kafka-python's codec module (not ours)."""
    from kafka import codec as kc
    if codec == 1:
        # kafka-python's gzip_encode stamps the current time into the gzip header: use
        # the same library call with mtime 0, so that seeds (and cases) are reproducible
        return gzip.compress(data, compresslevel=9, mtime=0)
    if codec == 2:
        return kc.snappy_encode(data)
    if codec == 3:
        return kc.lz4_encode_old_kafka(data) if magic == 0 else kc.lz4_encode(data)
    if codec == 4:
        return kc.zstd_encode(data)
    return data


def v2_batch(records: bytes, count: int, *, codec: int = 0, attrs: int = 0,
             base_offset: int = 0, last_delta: int | None = None,
             base_ts: int = 1_700_000_000_000, max_ts: int | None = None,
             producer_id: int = -1, epoch: int = -1, base_seq: int = -1,
             leader_epoch: int = 0) -> bytes:
    payload = library_compress(codec, records) if codec else records
    body = struct.pack(">hiqqqhii", attrs | codec,
                       count - 1 if last_delta is None else last_delta,
                       base_ts, base_ts if max_ts is None else max_ts,
                       producer_id, epoch, base_seq, count) + payload
    crc = _crc32c(body)
    return struct.pack(">qiibI", base_offset, 4 + 1 + 4 + len(body), leader_epoch, 2,
                       crc) + body


def _v2_with_payload(payload: bytes, count: int, codec: int) -> bytes:
    """A v2 batch around an already compressed ``payload``."""
    body = struct.pack(">hiqqqhii", codec, count - 1, 1_700_000_000_000,
                       1_700_000_000_000, -1, -1, -1, count) + payload
    return struct.pack(">qiibI", 0, 9 + len(body), 0, 2, _crc32c(body)) + body


def legacy_message(magic: int, offset: int, key, value, *, attrs: int = 0,
                   timestamp: int = -1) -> bytes:
    body = struct.pack(">bb", magic, attrs)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    msg = struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def _crc32c(data) -> int:
    import crc32c
    return crc32c.crc32c(data)


def fix_crcs(buf: bytearray) -> None:
    """Recompute the CRC of every batch whose length fits the buffer (v2: CRC-32C of
    [attributes, end); v0/v1: CRC-32 of [magic, end)), walking as far as lengths allow."""
    pos = 0
    n = len(buf)
    while pos + 17 <= n:
        size = struct.unpack_from(">i", buf, pos + 8)[0]
        end = pos + 12 + size
        if size < 5 or end > n:
            return
        magic = buf[pos + 16]
        if magic == 2 and size >= 9:
            struct.pack_into(">I", buf, pos + 17, _crc32c(bytes(buf[pos + 21:end])))
        elif magic in (0, 1):
            struct.pack_into(">I", buf, pos + 12, zlib.crc32(bytes(buf[pos + 16:end])) & 0xFFFFFFFF)
        pos = end


class Seed:
    """A valid buffer plus what the mutators need to know about its structure."""

    def __init__(self, name: str, data: bytes, *, rebuild=None, inner: bytes | None = None,
                 inner_is_legacy: bool = False, bomb: bool = False, weight: float = 1.0):
        self.name = name
        self.data = bytes(data)
        self.rebuild = rebuild          # inner bytes -> whole buffer (compressed seeds)
        self.inner = inner              # the decompressed records / inner message set
        self.inner_is_legacy = inner_is_legacy
        self.bomb = bomb
        self.weight = weight
        self.batches = []               # (position, size, magic)
        self.fields = []                # (position, struct fmt) of every header field
        self.varints = []               # (position, length) of every record varint
        self.inner_varints = []
        self._walk()

    def _walk(self):
        pos = 0
        d = self.data
        while pos + 17 <= len(d):
            size = struct.unpack_from(">i", d, pos + 8)[0]
            magic = d[pos + 16]
            self.batches.append((pos, 12 + size, magic))
            table = V2_FIELDS if magic == 2 else LEGACY_V1_FIELDS if magic == 1 else \
                LEGACY_V0_FIELDS
            self.fields += [(pos + off, fmt) for off, fmt in table if pos + off < pos + 12 + size]
            if magic == 2 and struct.unpack_from(">h", d, pos + 21)[0] & 7 == 0:
                count = struct.unpack_from(">i", d, pos + 57)[0]
                self.varints += _record_varints(d, pos + 61, count)
            pos += 12 + size
        if self.inner is not None and not self.inner_is_legacy:
            # v2: inner is a records section (legacy inner message sets have no varints)
            self.inner_varints = _record_varints(self.inner, 0, None)

    def boundaries(self):
        out = {0, len(self.data)}
        for pos, size, _ in self.batches:
            out.update({pos, pos + size, pos + 12, pos + 17, pos + 21, pos + 61})
        out.update(p for p, _ in self.fields)
        out.update(p for p, _ in self.varints)
        out.update(p + n for p, n in self.varints)
        return sorted(b for b in out if 0 <= b <= len(self.data))


def _record_varints(d: bytes, pos: int, count: int | None):
    """(position, length) of every varint of the records starting at ``pos``."""
    out = []
    n = 0
    while pos < len(d) and (count is None or n < count):
        start = pos
        length, pos = _read_varint(d, pos)
        out.append((start, pos - start))
        end = pos + length
        pos += 1                                    # attributes
        for _ in range(2):                          # timestamp delta, offset delta
            s = pos
            _, pos = _read_varint(d, pos)
            out.append((s, pos - s))
        for _ in range(2):                          # key, value
            s = pos
            ln, pos = _read_varint(d, pos)
            out.append((s, pos - s))
            pos += max(ln, 0)
        s = pos
        nh, pos = _read_varint(d, pos)
        out.append((s, pos - s))
        for _ in range(nh):
            for _ in range(2):
                s = pos
                ln, pos = _read_varint(d, pos)
                out.append((s, pos - s))
                pos += max(ln, 0)
        pos = end
        n += 1
    return out


def _sample_records(rng: random.Random, n: int):
    recs = []
    for i in range(n):
        key = None if i % 7 == 3 else (b"" if i % 11 == 5 else b"key-%d" % i)
        value = None if i % 9 == 4 else (b"" if i % 13 == 6 else
                                         bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 60))))
        headers = []
        if i % 3 == 0:
            headers = [("h%d" % j, None if j == 1 else b"v%d" % j) for j in range(i % 4 + 1)]
        if i % 5 == 2:
            headers.append(("ünï-☃", b""))
        recs.append((key, value, headers))
    return recs


def _v2_records_section(recs, ts_step: int = 3) -> bytes:
    return b"".join(v2_record(i, i * ts_step - (5 if i == 2 else 0), k, v, h)
                    for i, (k, v, h) in enumerate(recs))


def _kp_build(magic: int, codec: int, recs, batch_size: int = 1 << 20) -> bytes:
    from kafka.record.memory_records import MemoryRecordsBuilder
    b = MemoryRecordsBuilder(magic, codec, batch_size)
    for i, (k, v, h) in enumerate(recs):
        if b.append(1_700_000_000_000 + i, k, v, h if magic == 2 else None) is None:
            raise RuntimeError("seed does not fit")
    b.close()
    return bytes(b.buffer())


def make_seeds() -> list[Seed]:
    rng = random.Random(7)
    seeds: list[Seed] = []
    recs = _sample_records(rng, 12)
    section = _v2_records_section(recs)

    # v2, every codec, hand-built around kafka-python's codecs; inner mutation rebuilds
    for codec, name in enumerate(["none", "gzip", "snappy", "lz4", "zstd"]):
        def rebuild(inner, codec=codec, count=len(recs)):
            return v2_batch(inner, count, codec=codec, base_offset=100)
        seeds.append(Seed(f"v2-{name}", rebuild(section), rebuild=rebuild if codec else None,
                          inner=section if codec else None))
    # v2 from kafka-python's and aiokafka's builders, two batches with offsets assigned
    for impl in ("kafka-python", "aiokafka"):
        for codec in (0, 3):
            a = _builder_batches(impl, codec, recs[:6])
            b = _builder_batches(impl, codec, recs[6:])
            buf = bytearray(a + b)
            struct.pack_into(">q", buf, len(a), 6)
            seeds.append(Seed(f"v2-{impl}-codec{codec}", bytes(buf)))
    # special v2 batches
    control = v2_record(0, 0, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 5))
    seeds.append(Seed("v2-control-commit", v2_batch(control, 1, attrs=0x30, base_offset=12,
                                                     producer_id=77, epoch=1)))
    seeds.append(Seed("v2-transactional", v2_batch(section, len(recs), attrs=0x10,
                                                    base_offset=1, producer_id=77, epoch=1,
                                                    base_seq=0)))
    seeds.append(Seed("v2-empty", v2_batch(b"", 0, base_offset=40, last_delta=3)))
    seeds.append(Seed("v2-log-append-time", v2_batch(section, len(recs), attrs=0x08,
                                                      max_ts=1_800_000_000_000)))
    seeds.append(Seed("v2-delete-horizon", v2_batch(section, len(recs), attrs=0x40)))
    gaps = b"".join(v2_record(d, 0, b"k", b"v") for d in (0, 3, 4, 10))
    seeds.append(Seed("v2-compaction-gaps", v2_batch(gaps, 4, last_delta=10)))

    # legacy, uncompressed and compressed wrappers
    legacy_recs = [(k, v, []) for k, v, _ in recs[:8]]
    for magic in (0, 1):
        seeds.append(Seed(f"v{magic}-none", _kp_build(magic, 0, legacy_recs)))
        inner = _kp_build(magic, 0, legacy_recs)
        for codec, name in ((1, "gzip"), (2, "snappy"), (3, "lz4")):
            def rebuild(inner_set, magic=magic, codec=codec):
                return legacy_message(magic, 200 + 7, None,
                                      library_compress(codec, inner_set, magic),
                                      attrs=codec, timestamp=1_700_000_000_007)
            seeds.append(Seed(f"v{magic}-{name}-wrapper", rebuild(inner), rebuild=rebuild,
                              inner=inner, inner_is_legacy=True))
        seeds.append(Seed(f"v{magic}-kafka-python-gzip",
                          _zero_gzip_mtime(_kp_build(magic, 1, legacy_recs), magic)))

    # a segment that went through a message-format upgrade: v0, v1, then v2
    mixed = (legacy_message(0, 0, b"a", b"b") + legacy_message(1, 1, None, b"c", timestamp=5)
             + v2_batch(section, len(recs), base_offset=2))
    seeds.append(Seed("mixed-magic", mixed))

    # compression bombs: valid batches whose records decompress past the fuzz cap
    bomb_section = v2_record(0, 0, None, b"\x00" * (2 * MAX_DECOMPRESSED))
    for codec, name in ((1, "gzip"), (2, "snappy"), (3, "lz4"), (4, "zstd")):
        seeds.append(Seed(f"bomb-v2-{name}", v2_batch(bomb_section, 1, codec=codec),
                          bomb=True, weight=0.15 if codec == 2 else 0.5))
    # zstd without a content size in the frame (the Java client streams: no size), and an
    # lz4 frame that declares its content size: the decoder's other two bound paths
    import lz4.frame
    import zstandard
    unsized = zstandard.ZstdCompressor(write_content_size=False).compress(bomb_section)
    sized = lz4.frame.compress(bomb_section, store_size=True, block_linked=False)
    for name, payload, codec in (("zstd-unsized", unsized, 4), ("lz4-sized", sized, 3)):
        seeds.append(Seed(f"bomb-v2-{name}", _v2_with_payload(payload, 1, codec), bomb=True,
                          weight=0.5))
    bomb_inner = legacy_message(1, 0, None, b"\x00" * (2 * MAX_DECOMPRESSED))
    seeds.append(Seed("bomb-v1-gzip", legacy_message(
        1, 0, None, library_compress(1, bomb_inner), attrs=1, timestamp=1), bomb=True,
        weight=0.5))
    return seeds


def _zero_gzip_mtime(wrapper: bytes, magic: int) -> bytes:
    """A legacy gzip wrapper with the gzip header's MTIME zeroed (and its CRC fixed)."""
    buf = bytearray(wrapper)
    key_pos = 18 + (8 if magic == 1 else 0)
    key_len = struct.unpack_from(">i", buf, key_pos)[0]
    value = key_pos + 4 + max(key_len, 0) + 4
    if buf[value:value + 2] != b"\x1f\x8b":
        raise ValueError("not a gzip wrapper")
    buf[value + 4:value + 8] = b"\x00\x00\x00\x00"
    fix_crcs(buf)
    return bytes(buf)


def _builder_batches(impl: str, codec: int, recs) -> bytes:
    if impl == "aiokafka":
        from aiokafka.record.default_records import DefaultRecordBatchBuilder
    else:
        from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 1 << 20)
    for i, (k, v, h) in enumerate(recs):
        b.append(i, 1_700_000_000_000 + i, k, v, h)
    return bytes(b.build())


# ---------------------------------------------------------------------------------------
# mutations
# ---------------------------------------------------------------------------------------

def _rand_bytes(rng, n):
    return bytes(rng.getrandbits(8) for _ in range(n))


def mut_bitflip(rng, seed: Seed, data: bytearray) -> bytearray:
    for _ in range(rng.randint(1, 4)):
        if data:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return data


def mut_byteset(rng, seed, data):
    for _ in range(rng.randint(1, 3)):
        if data:
            data[rng.randrange(len(data))] = rng.choice([0, 0xFF, 0x7F, 0x80, 0x01,
                                                         rng.getrandbits(8)])
    return data


def mut_truncate(rng, seed, data):
    if rng.random() < 0.6:
        cut = rng.choice(seed.boundaries()) + rng.choice([-1, 0, 0, 1])
    else:
        cut = rng.randrange(len(data) + 1)
    return data[:max(0, min(cut, len(data)))]


def mut_field(rng, seed, data):
    pos, fmt = rng.choice(seed.fields)
    size = struct.calcsize(fmt)
    if pos + size > len(data):
        return data
    if rng.random() < 0.8:
        value = rng.choice(INTERESTING[fmt])
        if fmt == "i" and rng.random() < 0.3:
            # lengths just around what would fit
            value = len(data) - pos + rng.randint(-14, 2)
    else:
        lim = 8 * size
        value = rng.randrange(-(1 << (lim - 1)), 1 << (lim - 1)) if fmt != "I" else \
            rng.getrandbits(32)
    struct.pack_into(">" + fmt, data, pos, value)
    return data


def mut_attributes(rng, seed, data):
    pos, size, magic = rng.choice(seed.batches)
    if magic == 2 and pos + 23 <= len(data):
        attrs = struct.unpack_from(">h", data, pos + 21)[0]
        attrs = (attrs & ~7) | rng.randrange(8) if rng.random() < 0.7 else rng.getrandbits(15)
        struct.pack_into(">h", data, pos + 21, attrs)
    elif pos + 18 <= len(data):
        data[pos + 17] = (data[pos + 17] & ~7) | rng.randrange(8) if rng.random() < 0.7 \
            else rng.getrandbits(8)
    if rng.random() < 0.2 and pos + 17 <= len(data):
        data[pos + 16] = rng.choice([0, 1, 2, 3, 255, 127])
    return data


def mut_varint(rng, seed, data, varints=None):
    varints = seed.varints if varints is None else varints
    if not varints:
        return mut_bitflip(rng, seed, data)
    pos, n = rng.choice(varints)
    hostile = rng.choice(HOSTILE_VARINTS)
    if rng.random() < 0.5:
        data[pos:pos + n] = hostile                         # splice: shifts what follows
    else:
        data[pos:pos + min(n, len(hostile))] = hostile[:n]  # overwrite in place
    return data


def mut_inner(rng, seed, data):
    """Mutate the decompressed records (or inner message set), compress again: the batch
    CRC is correct, so the parser behind the codec sees the damage."""
    if seed.rebuild is None:
        return mut_bitflip(rng, seed, data)
    inner = bytearray(seed.inner)
    kind = rng.random()
    if kind < 0.35 and seed.inner_varints:
        inner = mut_varint(rng, seed, inner, seed.inner_varints)
    elif kind < 0.55:
        inner = inner[:rng.randrange(len(inner) + 1)]
    elif kind < 0.75:
        inner = mut_bitflip(rng, seed, inner)
        if seed.inner_is_legacy:
            fix_crcs(inner)     # inner legacy messages: reach past their CRC
    else:
        inner += _rand_bytes(rng, rng.randint(1, 40))
    return bytearray(seed.rebuild(bytes(inner)))


def mut_splice(rng, seed, data, seeds=None):
    other = rng.choice(seeds).data if seeds else seed.data
    kind = rng.random()
    if kind < 0.4:
        return data + bytearray(other)
    if kind < 0.7:
        cut = rng.randrange(len(data) + 1)
        return data[:cut] + bytearray(other[:rng.randrange(len(other) + 1)])
    pos, size, _ = rng.choice(seed.batches)
    return data[:pos + size] + bytearray(_rand_bytes(rng, rng.randint(1, 30))) + data[pos + size:]


MUTATIONS = [
    ("bitflip", mut_bitflip, 3), ("byteset", mut_byteset, 2), ("truncate", mut_truncate, 3),
    ("field", mut_field, 4), ("attributes", mut_attributes, 2), ("varint", mut_varint, 3),
    ("inner", mut_inner, 3), ("splice", mut_splice, 1),
]


class CaseMaker:
    """Turns a case number into (description, input bytes), deterministically."""

    def __init__(self, seed: int):
        self.seed = seed
        self.seeds = make_seeds()
        self.weights = [s.weight for s in self.seeds]
        self.mut_names = [m[0] for m in MUTATIONS]
        self.mut_weights = [m[2] for m in MUTATIONS]
        # exhaustive sweeps over the small (non-bomb) seeds
        self.sweep = []
        for si, s in enumerate(self.seeds):
            if s.bomb:
                continue
            self.sweep += [("cut", si, cut) for cut in range(len(s.data))]
            for pos, fmt in s.fields:
                for value in INTERESTING[fmt]:
                    self.sweep.append(("set", si, (pos, fmt, value)))
        # shuffled, so that any slice of the cases holds every kind of sweep item
        random.Random(seed).shuffle(self.sweep)

    def make(self, case: int):
        if case % 4 == 0:
            kind, si, arg = self.sweep[(case // 4) % len(self.sweep)]
            s = self.seeds[si]
            if kind == "cut":
                return f"sweep-cut {s.name}[:{arg}]", s.data[:arg], bool(case & 4)
            pos, fmt, value = arg
            buf = bytearray(s.data)
            if pos + struct.calcsize(fmt) <= len(buf):
                struct.pack_into(">" + fmt, buf, pos, value)
            fixed = bool(case & 4)
            if fixed:
                fix_crcs(buf)
            return f"sweep-set {s.name}@{pos}:{fmt}={value}", bytes(buf), fixed
        rng = random.Random((self.seed << 32) ^ case)
        s = rng.choices(self.seeds, self.weights)[0]
        data = bytearray(s.data)
        names = []
        for _ in range(1 if rng.random() < 0.7 else rng.randint(2, 3)):
            name, fn, _ = MUTATIONS[self.mut_names.index(
                rng.choices(self.mut_names, self.mut_weights)[0])]
            data = fn(rng, s, data, self.seeds) if fn is mut_splice else fn(rng, s, data)
            names.append(name)
        fixed = rng.random() < 0.5
        if fixed:
            fix_crcs(data)
        return f"{'+'.join(names)} {s.name}", bytes(data), fixed


# ---------------------------------------------------------------------------------------
# running cases
# ---------------------------------------------------------------------------------------

def run_case(fmt, KafkaLogError, case: int, data: bytes, crc_fixed: bool, counts: dict,
             disagreements: list | None = None):
    """Feed one input to every entry point; return a list of failure strings (anything
    but our error, an invalid result, a broken contract). Inputs that ``decode``
    accepts but ``scan_headers`` reports as a problem go to ``disagreements``."""
    failures = []
    if disagreements is None:
        disagreements = []
    rnd = random.Random(case)

    def attempt(label, fn, must_not_raise=False, base=0):
        try:
            result = fn()
        except KafkaLogError as err:
            if must_not_raise:
                failures.append(f"{label} raised {type(err).__name__}: {err}")
                return None
            str(err)                        # rendering the message must work too
            counts[type(err).__name__] = counts.get(type(err).__name__, 0) + 1
            # the message must say where: a byte position inside the input
            if err.position is None or not base <= err.position <= base + len(data):
                failures.append(f"{label} raised {type(err).__name__} with position "
                                f"{err.position} (input {len(data)} bytes at {base}): {err}")
            return None
        except BaseException as err:        # noqa: BLE001 — this is what we hunt for
            if isinstance(err, KeyboardInterrupt):
                raise
            failures.append(f"{label} raised {type(err).__name__}: {err!r}\n"
                            + "".join(traceback.format_exception(err)[-4:]))
            return None
        counts["ok"] = counts.get("ok", 0) + 1
        return result

    include_headers = bool(case & 1) or case % 7 == 0
    verify = crc_fixed or bool(case & 2)
    rb = attempt("decode", lambda: fmt.decode(
        data, topic="t", partition=3, verify_crc=verify, include_headers=include_headers,
        max_decompressed_bytes=MAX_DECOMPRESSED))
    if rb is not None:
        _check_batch(fmt, rb, include_headers, failures, "decode")
    scan_base = rnd.choice([0, 0, 1 << 33])
    scan_verify = bool(case & 8)
    scan = attempt("scan_headers", lambda: fmt.scan_headers(
        data, verify_crc=scan_verify, position_base=scan_base,
        first_offset_hint=rnd.choice([None, 0, 90])), must_not_raise=True)
    if scan is not None:
        _check_scan(scan, data, scan_base, failures)
        if rb is not None and (verify or not scan_verify) and scan.problem is not None:
            disagreements.append(f"decode accepted the input but scan_headers reports "
                                 f"{scan.problem}")
    if case % 3 == 0:
        positions = [0]
        if scan is not None:
            positions = [p - scan_base for p in
                         scan.headers.column("position").to_pylist()] or [0]
        start = rnd.choice([None, 0, 5, 100, 103, 1 << 40])
        end = rnd.choice([None, 0, 6, 110, 1 << 62])
        skip = sorted(set(rnd.sample(positions, min(len(positions), rnd.randint(0, 2)))))
        base = rnd.choice([0, 4096])
        rb = attempt("decode_run", lambda: fmt.decode_run(
            data, topic="t", partition=0, verify_crc=verify, include_headers=True,
            max_decompressed_bytes=MAX_DECOMPRESSED, start_offset=start, end_offset=end,
            skip_positions=skip, position_base=base), base=base)
        if rb is not None:
            _check_batch(fmt, rb, True, failures, "decode_run")
        pos = rnd.choice([0, 0, rnd.randrange(len(data) + 1)])
        attempt("read_batch_header", lambda: fmt.read_batch_header(data, pos))
    return failures


def _check_scan(scan, data: bytes, base: int, failures) -> None:
    """HeaderScan's contract on any input: whole batches laid end to end from the start,
    ``end`` just after the last, a problem exactly when the data does not end there."""
    table = scan.headers
    if table.schema != _batch_header_schema():
        failures.append(f"scan_headers returned schema {table.schema}")
        return
    pos = table.column("position").to_pylist()
    size = table.column("size").to_pylist()
    expect = base
    for p, n in zip(pos, size):
        if p != expect or n < 12 + 14:
            failures.append(f"scan_headers rows not contiguous: {list(zip(pos, size))[:8]}")
            return
        expect = p + n
    if scan.end != expect or scan.end > base + len(data):
        failures.append(f"scan_headers end {scan.end}, rows end at {expect}, data ends at "
                        f"{base + len(data)}")
    if (scan.problem is None) != (scan.end == base + len(data)):
        failures.append(f"scan_headers problem {scan.problem} with end {scan.end} of "
                        f"{base + len(data)}")
    if scan.problem is not None and not (
            scan.problem.kind in ("torn", "corrupt") and scan.problem.position == scan.end):
        failures.append(f"scan_headers problem {scan.problem} (end {scan.end})")


def _batch_header_schema():
    from spark_kafkalog.format.schema import BATCH_HEADER_SCHEMA
    return BATCH_HEADER_SCHEMA


def _check_batch(fmt, rb, include_headers, failures, label):
    try:
        rb.validate(full=True)
    except Exception as err:            # noqa: BLE001 — an invalid Arrow batch is a bug
        failures.append(f"{label} returned an invalid Arrow batch: {err!r}")
        return
    if rb.schema != fmt.record_schema(include_headers):
        failures.append(f"{label} returned schema {rb.schema}")


def run_fuzz(seed: int, start: int, count: int, progress=None, verbose=False,
             inject: tuple[str, int] | None = None) -> dict:
    """Run cases [start, start + count); return a summary (see the module docstring).
    ``inject=("segv" | "hang", case)`` makes that case crash or hang (tests the harness)."""
    import pyarrow as pa

    from spark_kafkalog import format as fmt
    from spark_kafkalog.errors import KafkaLogError

    maker = CaseMaker(seed)
    pool = pa.default_memory_pool()
    # every seed must decode cleanly (bombs must fail with our error): otherwise the
    # fuzzer would be mutating garbage, or the decoder has a bug on valid input
    seed_problems = []
    for s in maker.seeds:
        try:
            fmt.decode(s.data, max_decompressed_bytes=MAX_DECOMPRESSED)
            if s.bomb:
                seed_problems.append(f"bomb seed {s.name} decoded without error")
        except KafkaLogError as err:
            if not s.bomb:
                seed_problems.append(f"valid seed {s.name}: {type(err).__name__}: {err}")
        except Exception as err:        # noqa: BLE001
            seed_problems.append(f"seed {s.name}: {type(err).__name__}: {err!r}")
    from tests.memutil import peak_rss_kb     # the child puts the repo on sys.path first
    rss_base = peak_rss_kb()
    counts: dict = {}
    failures = []
    n_failures = 0
    disagreements = []
    n_disagreements = 0
    slowest = (0.0, None)
    kinds: dict = {}
    cases_run = 0
    t_start = time.perf_counter()
    for case in range(start, start + count):
        if progress is not None:
            struct.pack_into("<q", progress, 0, case)
        desc, data, fixed = maker.make(case)
        if inject is not None and inject[1] == case:
            _inject(inject[0])
        for kind in desc.split(" ")[0].split("+"):
            kinds[kind] = kinds.get(kind, 0) + 1
        cases_run += 1
        disagree: list = []
        # CPU time: on a shared machine wall time mostly measures the wait for a core
        # (a case that blocks instead of spinning is caught by the parent's watchdog)
        t0 = time.process_time()
        fails = run_case(fmt, KafkaLogError, case, data, fixed, counts, disagree)
        dt = time.process_time() - t0
        if disagree:
            n_disagreements += 1
            if len(disagreements) < 25:
                disagreements.append({"case": case, "input": desc, "len": len(data),
                                      "hex": data[:256].hex(), "disagreements": disagree})
        if dt > slowest[0]:
            slowest = (dt, f"case {case}: {desc} ({len(data)} bytes)")
        if dt > CASE_CPU_LIMIT:
            fails.append(f"took {dt:.1f} s of CPU")
        if fails:
            n_failures += 1
            if len(failures) < 25:
                failures.append({"case": case, "input": desc, "len": len(data),
                                 "crc_fixed": fixed, "hex": data[:256].hex(),
                                 "failures": fails})
        if verbose:
            print(f"case {case}: {desc} ({len(data)} bytes) -> "
                  f"{fails or 'ok / KafkaLogError only'}", flush=True)
    return {
        "seed": seed, "start": start, "count": count, "cases_run": cases_run,
        "seconds": round(time.perf_counter() - t_start, 2),
        "outcomes": counts, "mutation_kinds": kinds,
        "n_failures": n_failures, "failures": failures, "seed_problems": seed_problems,
        "n_disagreements": n_disagreements, "disagreements": disagreements,
        "slowest_case_cpu_seconds": round(slowest[0], 4), "slowest_case": slowest[1],
        "arrow_peak_bytes": pool.max_memory(),
        "rss_base_kb": rss_base,
        "rss_peak_kb": peak_rss_kb(),
        "sweep_items": len(maker.sweep), "seeds": [s.name for s in maker.seeds],
    }


def _inject(what: str) -> None:
    if what == "segv":
        import ctypes
        ctypes.string_at(0)             # a real segmentation fault, as a C bug would give
    elif what == "hang":
        import threading
        threading.Event().wait()        # blocks forever, as a stuck loop would


def run_in_subprocess(seed: int, start: int, count: int, timeout: float,
                      stall_seconds: float = HANG_SECONDS, extra_args=()) -> dict:
    """Run the fuzz loop in a child process; a crash or hang becomes a result naming
    the case to reproduce. The child is declared hung when one case runs longer than
    ``stall_seconds`` (watched through its progress counter) or the whole run longer
    than ``timeout``."""
    here = os.path.abspath(__file__)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    with tempfile.TemporaryDirectory(prefix="kafkalog-fuzz-") as tmp:
        result_path = os.path.join(tmp, "result.json")
        progress_path = os.path.join(tmp, "progress")
        with open(progress_path, "wb") as f:
            f.write(struct.pack("<q", -1))

        def progress() -> int:
            with open(progress_path, "rb") as f:
                return struct.unpack("<q", f.read(8))[0]

        cmd = [sys.executable, here, "--seed", str(seed), "--start", str(start),
               "--count", str(count), "--result", result_path, "--progress", progress_path,
               *extra_args]
        # the child imports the package from this checkout, installed or not
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, env.get("PYTHONPATH")) if p)
        proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + timeout
        last_case, last_change = -1, time.monotonic()
        hung = False
        while True:
            try:
                _, stderr = proc.communicate(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                now = time.monotonic()
                case = progress()
                if case != last_case:
                    last_case, last_change = case, now
                elif (case >= 0 and now - last_change > stall_seconds) or now > deadline:
                    hung = True
                    proc.kill()
                    _, stderr = proc.communicate()
                    break
        last_case = progress()
        result = None
        if not hung and os.path.exists(result_path):
            with open(result_path) as f:
                result = json.load(f)
    repro = (f"python tests/format/test_fuzz.py --seed {seed} --start {last_case} "
             f"--count 1 --verbose")
    return {"rc": None if hung else proc.returncode, "hung": hung,
            "stderr": (stderr or "")[-4000:], "last_case": last_case, "result": result,
            "repro": repro}


def _child_main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="fuzz spark_kafkalog.format (child process)")
    ap.add_argument("--seed", type=int, default=FUZZ_SEED)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--result")
    ap.add_argument("--progress")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--no-rlimit", action="store_true")
    ap.add_argument("--inject", choices=["segv", "hang"], help="harness self-test")
    ap.add_argument("--inject-at", type=int, default=0)
    args = ap.parse_args(argv)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if repo not in sys.path:
        sys.path.insert(0, repo)
    faulthandler.enable()               # a segfault prints the Python stack to stderr
    if not args.no_rlimit:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
    progress = None
    if args.progress:
        fd = os.open(args.progress, os.O_RDWR)
        progress = mmap.mmap(fd, 8)
    result = run_fuzz(args.seed, args.start, args.count, progress, args.verbose,
                      (args.inject, args.inject_at) if args.inject else None)
    text = json.dumps(result, indent=1)
    if args.result:
        with open(args.result, "w") as f:
            f.write(text)
    else:
        print(text)
    return 0


# ---------------------------------------------------------------------------------------
# the tests
# ---------------------------------------------------------------------------------------

if __name__ != "__main__":
    import pytest

    def _assert_clean(run: dict, count: int) -> None:
        where = f"seed {FUZZ_SEED}; reproduce the last case with: {run['repro']}"
        if run["hung"]:
            pytest.fail(f"fuzz child hung at case {run['last_case']} ({where})")
        if run["rc"] != 0:
            pytest.fail(f"fuzz child died (exit {run['rc']}) at case {run['last_case']} "
                        f"({where})\n{run['stderr']}")
        res = run["result"]
        assert res is not None, run["stderr"]
        assert not res["seed_problems"], res["seed_problems"]
        assert res["n_failures"] == 0, json.dumps(res["failures"][:5], indent=1)
        assert res["cases_run"] == count
        # bounded memory: inputs are a few KiB and decompression is capped at 1 MiB
        assert res["arrow_peak_bytes"] < ARROW_PEAK_LIMIT, res["arrow_peak_bytes"]
        assert res["rss_peak_kb"] - res["rss_base_kb"] < RSS_GROWTH_LIMIT_KB, res
        # the mutations must reach our error paths, not only the happy path
        errors = {k: v for k, v in res["outcomes"].items() if k != "ok"}
        assert errors.get("CorruptRecordError", 0) > count // 20, res["outcomes"]

    @pytest.fixture(scope="module")
    def fuzz_10k():
        return run_in_subprocess(FUZZ_SEED, 0, 10_000, timeout=480)

    @pytest.fixture(scope="module")
    def fuzz_100k():
        return run_in_subprocess(FUZZ_SEED, 0, 100_000, timeout=1700)

    def _assert_agreement(run: dict) -> None:
        res = run["result"]
        assert res is not None, run["stderr"]
        assert res["n_disagreements"] == 0, (
            f"{res['n_disagreements']} inputs decoded without error that scan_headers "
            f"reports as bad; first: " + json.dumps(res["disagreements"][:3], indent=1))

    def test_fuzz_10k_gives_only_our_errors(fuzz_10k):
        """10,000 cases on every run (sweeps included: one in four)."""
        _assert_clean(fuzz_10k, 10_000)
        assert fuzz_10k["result"]["outcomes"].get("CodecError", 0) > 0

    def test_fuzz_10k_decode_and_scan_agree(fuzz_10k):
        """Whatever decode accepts, scan_headers (same CRC setting) accepts too: the log
        layer scans with one and reads with the other."""
        _assert_agreement(fuzz_10k)

    @pytest.mark.slow
    @pytest.mark.timeout(1800)
    def test_fuzz_100k_gives_only_our_errors(fuzz_100k):
        """The acceptance run of issue 2: 100,000 fuzzed inputs."""
        _assert_clean(fuzz_100k, 100_000)
        # the sweeps were exhaustive: every truncation point and interesting header
        # value of every small seed went through
        assert 100_000 // 4 >= fuzz_100k["result"]["sweep_items"]

    @pytest.mark.slow
    @pytest.mark.timeout(1800)
    def test_fuzz_100k_decode_and_scan_agree(fuzz_100k):
        _assert_agreement(fuzz_100k)

    def test_decode_rejects_a_control_batch_scan_rejects():
        """Found by the fuzzer: a control batch with an unknown codec id (or a payload
        that does not decompress, or no valid control key) is reported as corrupt by
        scan_headers -- and by Kafka's consumer, which reads the control record -- but
        decode skips it silently."""
        from spark_kafkalog import format as fmt
        from spark_kafkalog.errors import KafkaLogError
        marker = v2_record(0, 0, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 5))
        cases = [(0x30 | 7, marker, "unknown codec id 7"),
                 (0x30 | 1, marker, "gzip attribute, payload not gzip"),
                 (0x30, v2_record(0, 0, b"\xff", b""), "key is not a control key")]
        for attrs, records, what in cases:
            # codec bits set by hand: the payload is stored as is (valid CRC)
            data = v2_batch(records, 1, attrs=attrs, base_offset=12, producer_id=77,
                            epoch=1)
            scan = fmt.scan_headers(data, verify_crc=True)
            assert scan.problem is not None and scan.problem.kind == "corrupt", what
            with pytest.raises(KafkaLogError):
                fmt.decode(data)

    def test_harness_reports_a_segfault_with_its_case():
        """The harness itself: a child killed by SIGSEGV at case 37 is reported as such,
        with the case to reproduce, instead of taking pytest down."""
        run = run_in_subprocess(FUZZ_SEED, 30, 20, timeout=300,
                                extra_args=["--inject", "segv", "--inject-at", "37"])
        assert run["rc"] == -11 and not run["hung"], run
        assert run["last_case"] == 37
        assert "--start 37" in run["repro"]
        assert "Fatal Python error" in run["stderr"]      # faulthandler's stack dump
        assert run["result"] is None

    def test_harness_reports_a_hang_with_its_case():
        run = run_in_subprocess(FUZZ_SEED, 0, 20, timeout=300, stall_seconds=2,
                                extra_args=["--inject", "hang", "--inject-at", "5"])
        assert run["hung"] and run["last_case"] == 5, run

    def test_cases_are_deterministic():
        """Case i depends only on (seed, i) -- not on the clock (gzip headers carry a
        time stamp), so a reported case can be replayed."""
        from unittest import mock
        maker = CaseMaker(FUZZ_SEED)
        with mock.patch("time.time", return_value=2_000_000_000.5):
            again = CaseMaker(FUZZ_SEED)
        assert [s.data for s in maker.seeds] == [s.data for s in again.seeds]
        for case in (0, 1, 2, 3, 4, 5, 999, 12345, 99_999):
            assert maker.make(case) == again.make(case)

    def test_seeds_are_valid_for_independent_decoders():
        """The seeds are real Kafka bytes: kafka-python reads every non-bomb one with
        every CRC correct (so the fuzzer mutates valid input, not noise)."""
        from kafka.record.memory_records import MemoryRecords
        for s in CaseMaker(FUZZ_SEED).seeds:
            if s.bomb or s.name in ("v2-control-commit",):
                continue
            records = MemoryRecords(s.data)
            n = 0
            while (batch := records.next_batch()) is not None:
                if batch.magic == 2:
                    assert batch.validate_crc(), s.name
                for rec in batch:
                    if batch.magic < 2:
                        assert rec.validate_crc(), s.name
                    n += 1
            if s.name != "v2-empty":
                assert n > 0, s.name

    @pytest.mark.parametrize("codec", [1, 2, 3, 4])
    def test_bombs_give_codec_error(codec):
        """A valid batch whose payload inflates past the cap fails with CodecError
        naming the batch position, at the cap given and at the default cap."""
        from spark_kafkalog import format as fmt
        from spark_kafkalog.errors import CodecError
        bomb = v2_batch(v2_record(0, 0, None, b"\x00" * (2 * MAX_DECOMPRESSED)), 1,
                        codec=codec, base_offset=5)
        data = v2_batch(v2_record(0, 0, b"k", b"v"), 1) + bomb
        with pytest.raises(CodecError) as info:
            fmt.decode(data, max_decompressed_bytes=MAX_DECOMPRESSED)
        assert info.value.position == len(data) - len(bomb)
        # under the default cap the same batch is fine
        assert fmt.decode(data).num_rows == 2

    def test_hostile_record_count_is_bounded():
        """A batch claiming 2**31-1 records in a few bytes fails at once without
        allocating for the claimed count (the Arrow pool peak stays small)."""
        import pyarrow as pa

        from spark_kafkalog import format as fmt
        from spark_kafkalog.errors import CorruptRecordError
        rec = v2_record(0, 0, b"k", b"v")
        for codec in (0, 4):
            data = bytearray(v2_batch(rec, 1, codec=codec))
            struct.pack_into(">i", data, 57, (1 << 31) - 1)
            fix_crcs(data)
            before = pa.default_memory_pool().max_memory()
            with pytest.raises(CorruptRecordError):
                fmt.decode(bytes(data))
            assert pa.default_memory_pool().max_memory() - before < (16 << 20)


if __name__ == "__main__":
    sys.exit(_child_main())

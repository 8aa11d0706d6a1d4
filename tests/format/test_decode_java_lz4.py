"""decode() against lz4 batches built by Kafka's own Java record builder (kafka-clients'
MemoryRecordsBuilder with its Lz4BlockOutputStream, the producer's path): a batch of one
record (record 0 of the tier's ``java-lz4``), and batches whose blocks Kafka's writer
stores uncompressed (high bit of the block size set) because lz4 does not shrink them:
a one-record batch, a record of two stored 64 KiB-bounded blocks, the smallest record.
A tiny Java program, compiled here against the tier's jars (``make kafka-jars``; without
them the test fails saying so), writes the batches; the rows must be exactly its input."""
from __future__ import annotations

import os
import struct
import subprocess

import pytest

from spark_kafkalog.format.decode import decode
from tests.kafka.broker import (CLIENT_JVM, JAVA, JAVAC, KafkaTierError, classpath,
                                require_jars)

pytestmark = pytest.mark.kafka

WRITER = r"""
import java.io.*;
import java.nio.ByteBuffer;
import java.nio.file.*;
import java.util.HexFormat;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.record.internal.*;

// spec lines: "B base" starts a batch, "R ts key value" (hex, "-" null, "~" empty) appends a
// record, "E" ends the batch; the batches are written back to back to the output file
public class Lz4Batches {
    static byte[] hex(String s) {
        return s.equals("-") ? null : s.equals("~") ? new byte[0] : HexFormat.of().parseHex(s);
    }
    public static void main(String[] args) throws Exception {
        try (OutputStream out = new FileOutputStream(args[1])) {
            MemoryRecordsBuilder b = null;
            for (String line : Files.readAllLines(Paths.get(args[0]))) {
                String[] f = line.split(" ");
                if (f[0].equals("B")) {
                    b = MemoryRecords.builder(ByteBuffer.allocate(1024),
                        Compression.lz4().build(), TimestampType.CREATE_TIME,
                        Long.parseLong(f[1]));
                } else if (f[0].equals("R")) {
                    b.append(Long.parseLong(f[1]), hex(f[2]), hex(f[3]));
                } else {
                    ByteBuffer buf = b.build().buffer();
                    byte[] bytes = new byte[buf.remaining()];
                    buf.get(bytes);
                    out.write(bytes);
                }
            }
        }
    }
}
"""

TS = 1_700_000_000_000
#: (name, records (timestamp, key, value)); each case is one batch
CASES = [
    ("tier-record-0", [(TS, b"java-lz4-k0", b"java-lz4-v0-")]),
    ("one-random", [(TS + 1, None, os.urandom(200))]),
    ("two-stored-blocks", [(TS + 2, b"k", os.urandom(70_000))]),
    ("smallest", [(TS + 3, None, b"")]),
    ("mixed", [(TS + 4 + i, b"k%d" % i, os.urandom(40) if i % 2 else b"v" * 300)
               for i in range(6)]),
]


def spec_bytes(b: bytes | None) -> str:
    return "-" if b is None else (b.hex() or "~")


def java_batches(tmp_path) -> bytes:
    try:
        require_jars()
    except KafkaTierError as err:
        pytest.fail(f"kafka tier: {err}", pytrace=False)
    src = tmp_path / "Lz4Batches.java"
    src.write_text(WRITER)
    subprocess.run([JAVAC, "-nowarn", "-cp", classpath(), "-d", str(tmp_path), str(src)],
                   check=True, capture_output=True, timeout=300)
    lines, base = [], 0
    for _name, recs in CASES:
        lines.append(f"B {base}")
        lines += [f"R {ts} {spec_bytes(k)} {spec_bytes(v)}" for ts, k, v in recs]
        lines.append("E")
        base += len(recs)
    spec, out = tmp_path / "spec.txt", tmp_path / "batches.bin"
    spec.write_text("\n".join(lines) + "\n")
    subprocess.run([JAVA, *CLIENT_JVM, "-cp", classpath(tmp_path), "Lz4Batches",
                    str(spec), str(out)], check=True, capture_output=True, timeout=300)
    return out.read_bytes()


def lz4_blocks(data: bytes) -> list[list[bool]]:
    """Per batch, per lz4 block: whether Kafka's writer stored it uncompressed (read here
    from the frame format: 7-byte header of Kafka's frames, then uint32-LE block sizes
    whose high bit means stored, 0 ends the frame)."""
    out, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        payload = data[pos + 61:pos + 12 + length]
        assert payload[:4] == b"\x04\x22\x4d\x18" and payload[4] & 0x08 == 0   # no size
        p, blocks = 7, []
        while (word := struct.unpack_from("<I", payload, p)[0]) != 0:
            blocks.append(bool(word & 0x80000000))
            p += 4 + (word & 0x7FFFFFFF)
        out.append(blocks)
        pos += 12 + length
    return out


def test_java_lz4_single_record_and_stored_blocks_decode_exactly(tmp_path):
    data = java_batches(tmp_path)
    blocks = lz4_blocks(data)
    # the cases exercise what they say: Kafka compressed record 0, stored the random ones
    assert blocks[0] == [False]
    assert blocks[1] == [True] and blocks[2] == [True, True] and blocks[3] == [True]
    got = decode(data, topic="java-lz4").to_pylist()
    want = [(off, ts, k, v) for off, (ts, k, v) in
            enumerate(r for _name, recs in CASES for r in recs)]
    assert [(r["offset"], int(r["timestamp"].timestamp() * 1000), r["key"], r["value"])
            for r in got] == want
    assert {r["timestampType"] for r in got} == {0}

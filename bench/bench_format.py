"""Format-layer benchmark: our compiled decode/encode against aiokafka and kafka-python.

One run, one generated data set (``bench/_data.py``: 1,000,000 records by default,
16-byte keys, ~120-byte values, headers on 1 in 5, 16 KiB batches), three parts:

(a) decode, uncompressed v2: ``spark_kafkalog.format.decode`` vs aiokafka's Cython
    ``MemoryRecords``/``DefaultRecordBatch`` vs kafka-python's pure-Python classes. The
    Python decoders check each batch's CRC and touch key, value, offset, timestamp and
    headers of every record (what a consumer does); ours builds the Arrow columns with
    headers and checks the CRC.
(b) decode per codec (gzip, snappy, lz4, zstd): the same three, plus the codec library
    alone decompressing exactly the payloads of those batches (cut out before timing;
    for snappy the xerial blocks are cut out too, so only the library call is timed).
(c) encode (none, lz4, zstd): ``format.encode`` from the Arrow table vs the builders'
    ``append`` per record, closed into 16 KiB batches, each at its default compression
    level (zstd: 3 for both; lz4: ours is Kafka's default "level 9", which the Java
    client maps to lz4's fast compressor, while aiokafka runs LZ4 HC level 9 -- the
    table prints the output size ratio next to the speed ratio for that reason).

Every decode input is written by aiokafka's builder (not by us), so the benchmark is a
cross-check too: our decoded table must equal the generated one exactly, and every
decoder's (row count, checksum) must agree. Our encoder's output is read back by
aiokafka's decoder and must give the same count and checksum.

The machine is shared: figures are medians of ``--repeat`` runs and the ratios (all
implementations timed in the same run, interleaved) are what to compare. kafka-python is
timed on the first ``--slow-records`` records only (it is ~100x slower); its records/s
are still comparable.

Usage: ``python bench/bench_format.py [--records N] [--repeat R] [--json] [--strict]``
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import struct
import sys
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

import _data  # noqa: E402

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
#: compression levels of aiokafka's builder (aiokafka/codec.py, through cramjam): gzip 9,
#: lz4 9 (= LZ4 HC level 9), zstd 3
AIOKAFKA_LEVELS = {"gzip": "9", "lz4": "HC 9", "zstd": "3", "snappy": "-", "none": "-"}
#: our encode's defaults (the Java client's): gzip 6, lz4 "9" which Kafka maps to
#: lz4-java's *fast* compressor, zstd 3
OUR_DEFAULT_LEVELS = {"gzip": "6", "lz4": "fast", "zstd": "3", "snappy": "-", "none": "-"}
#: acceptance of issue 2: decode time / codec-library time must be at most this
CODEC_OVERHEAD_LIMIT = {"gzip": 1.3, "zstd": 1.3, "lz4": 2.0, "snappy": 2.0}
DECODE_VS_AIOKAFKA_MIN = {"none": 10.0}
ENCODE_VS_AIOKAFKA_MIN = {"none": 5.0, "lz4": 2.0, "zstd": 2.0}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def timed(fn, repeat: int):
    """Median wall time of ``repeat`` calls of ``fn`` and its last result."""
    times = []
    result = None
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


# ---- the Python decoders ------------------------------------------------------------------

def aiokafka_classes():
    """aiokafka's MemoryRecords, insisting on the Cython implementation."""
    if os.environ.get("AIOKAFKA_NO_EXTENSIONS"):
        raise SystemExit("AIOKAFKA_NO_EXTENSIONS is set: aiokafka would run pure Python; "
                         "unset it to benchmark its Cython decoder")
    from aiokafka.record.default_records import DefaultRecordBatchBuilder
    from aiokafka.record.memory_records import MemoryRecords
    for cls in (MemoryRecords, DefaultRecordBatchBuilder):
        if not cls.__module__.startswith("aiokafka.record._crecords"):
            raise SystemExit(f"aiokafka {cls.__name__} is {cls.__module__}, not the Cython "
                             "_crecords extension: rebuild/reinstall aiokafka")
    return MemoryRecords


def iterate_records(memory_records_cls, data) -> tuple[int, int]:
    """Decode ``data`` as a consumer does: validate every batch CRC, touch key, value,
    offset, timestamp and headers of each record. Returns (count, checksum) where the
    checksum is sum(offset) + sum(len(value)) + number of headers."""
    records = memory_records_cls(data)
    count = 0
    check = 0
    while True:
        batch = records.next_batch()
        if batch is None:
            break
        if not batch.validate_crc():
            raise AssertionError(f"CRC check failed in batch at offset {batch.base_offset}")
        for rec in batch:
            key = rec.key
            value = rec.value
            ts = rec.timestamp
            headers = rec.headers
            if key is None or ts is None:
                raise AssertionError("generated records all have keys and timestamps")
            count += 1
            check += rec.offset + len(value) + len(headers)
    return count, check


def expected_checksum(table: pa.Table, base_offset: int = 0) -> tuple[int, int]:
    n = table.num_rows
    value_bytes = pc.sum(pc.binary_length(table.column("value"))).as_py() or 0
    headers = pc.sum(pc.list_value_length(table.column("headers"))).as_py() or 0
    return n, n * base_offset + n * (n - 1) // 2 + value_bytes + headers


def arrow_checksum(batch) -> tuple[int, int]:
    n = batch.num_rows
    offsets = pc.sum(batch.column("offset")).as_py() or 0
    value_bytes = pc.sum(pc.binary_length(batch.column("value"))).as_py() or 0
    headers = pc.sum(pc.list_value_length(batch.column("headers"))).as_py() or 0
    return n, offsets + value_bytes + headers


def check_equal(decoded, table: pa.Table, what: str) -> None:
    """Our decoded batch must be the generated table, exactly."""
    if decoded.num_rows != table.num_rows:
        raise AssertionError(f"{what}: {decoded.num_rows} rows, expected {table.num_rows}")
    for name in ("key", "value", "timestamp", "headers"):
        got = decoded.column(name)
        want = table.column(name).combine_chunks()
        if not got.equals(want.cast(got.type)):
            raise AssertionError(f"{what}: column {name!r} differs from the generated data")
    offsets = decoded.column("offset").to_numpy()
    if not np.array_equal(offsets, np.arange(table.num_rows, dtype=np.int64)):
        raise AssertionError(f"{what}: offsets are not 0..n-1")
    if pc.any(pc.not_equal(decoded.column("timestampType"), 0)).as_py():
        raise AssertionError(f"{what}: timestampType is not CreateTime")


def prefix_of_log(data: bytes, min_records: int) -> tuple[bytes, int]:
    """The leading whole batches of ``data`` holding at least ``min_records`` records."""
    count = 0
    end = 0
    for pos, size in _data.split_batches(data):
        if count >= min_records:
            break
        count += struct.unpack_from(">i", data, pos + 57)[0]
        end = pos + size
    return data[:end], count


# ---- codec library alone --------------------------------------------------------------------

def codec_only(codec: str, payloads):
    """A function decompressing every payload with the codec library alone, and the
    total decompressed size it returns. Framing that is not the library's (xerial
    snappy blocks) is cut out beforehand, so only library calls are timed."""
    if codec == "gzip":
        items = [bytes(p) for p in payloads]

        def run():
            return sum(len(zlib.decompress(p, 31)) for p in items)
    elif codec == "snappy":
        import cramjam          # python-snappy >= 0.7 is itself a wrapper of cramjam
        blocks = []
        for p in payloads:
            p = bytes(p)
            if p[:8] == b"\x82SNAPPY\x00":
                pos = 16
                while pos < len(p):
                    (n,) = struct.unpack_from(">i", p, pos)
                    blocks.append(p[pos + 4:pos + 4 + n])
                    pos += 4 + n
            else:
                blocks.append(p)
        uncompress = cramjam.snappy.decompress_raw

        def run():
            return sum(len(uncompress(b)) for b in blocks)
    elif codec == "lz4":
        import lz4.frame
        items = [bytes(p) for p in payloads]
        decompress = lz4.frame.decompress

        def run():
            return sum(len(decompress(p)) for p in items)
    elif codec == "zstd":
        import zstandard
        items = [bytes(p) for p in payloads]
        dctx = zstandard.ZstdDecompressor()
        # One-shot decompression needs the content size in the frame header (aiokafka
        # and the Java client write it); fall back to streaming when it is absent.
        one_shot = all(zstandard.frame_content_size(p) > 0 for p in items)

        def run():
            if one_shot:
                return sum(len(dctx.decompress(p)) for p in items)
            return sum(len(dctx.stream_reader(p, read_across_frames=True).read()) for p in items)
    else:
        raise ValueError(codec)
    return run


# ---- the benchmark --------------------------------------------------------------------------

def rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def bench_decode(fmt, table, records, codecs, repeat, slow_records, results):
    for codec in codecs:
        log(f"decode {codec}: building input with aiokafka's builder ...")
        data = _data.build_log(records, "aiokafka", CODEC_IDS[codec], 16384)
        results["decode"].append(_decode_one(fmt, table, codec, data, repeat, slow_records))


def _decode_one(fmt, table, codec, data, repeat, slow_records) -> dict:
    from kafka.record.memory_records import MemoryRecords as KpMemoryRecords
    AioMemoryRecords = aiokafka_classes()
    n = table.num_rows
    expected = expected_checksum(table)
    row = {"codec": codec, "records": n, "bytes": len(data),
           "batches": len(_data.split_batches(data))}

    # correctness first, untimed: exact equality with the generated table
    decoded = fmt.decode(data)
    check_equal(decoded, table, f"decode {codec}")
    if arrow_checksum(decoded) != expected:
        raise AssertionError(f"decode {codec}: checksum {arrow_checksum(decoded)} "
                             f"!= expected {expected}")
    del decoded

    slow_data, slow_n = prefix_of_log(data, slow_records)
    lib = codec_only(codec, _data.compressed_payloads(data)) if codec != "none" else None

    def ours():
        return fmt.decode(data).num_rows

    def aiokafka():
        return iterate_records(AioMemoryRecords, data)

    def kafka_python():
        return iterate_records(KpMemoryRecords, slow_data)

    # timed, interleaved so that load changes hit every implementation alike
    t_ours, t_aio, t_kp, t_lib = [], [], [], []
    for _ in range(repeat):
        t, got = timed(ours, 1)
        t_ours.append(t)
        if got != n:
            raise AssertionError(f"decode {codec}: {got} rows, expected {n}")
        t, got = timed(aiokafka, 1)
        t_aio.append(t)
        if got != expected:
            raise AssertionError(f"aiokafka decode {codec}: {got} != {expected}")
        if lib is not None:
            t, got = timed(lib, 1)
            t_lib.append(t)
    for _ in range(max(1, min(repeat, 3))):
        t, got = timed(kafka_python, 1)
        t_kp.append(t)
        if got[0] != slow_n:
            raise AssertionError(f"kafka-python decode {codec}: {got[0]} != {slow_n}")
    row["ours_s"] = statistics.median(t_ours)
    row["aiokafka_s"] = statistics.median(t_aio)
    row["kafka_python_s"] = statistics.median(t_kp)
    row["kafka_python_records"] = slow_n
    row["ours_rps"] = rate(n, row["ours_s"])
    row["aiokafka_rps"] = rate(n, row["aiokafka_s"])
    row["kafka_python_rps"] = rate(slow_n, row["kafka_python_s"])
    row["vs_aiokafka"] = row["ours_rps"] / row["aiokafka_rps"]
    row["vs_kafka_python"] = row["ours_rps"] / row["kafka_python_rps"]
    if t_lib:
        row["codec_s"] = statistics.median(t_lib)
        row["codec_rps"] = rate(n, row["codec_s"])
        row["ours_over_codec"] = row["ours_s"] / row["codec_s"]
        # the same ratio per repetition (each pair ran back to back)
        row["ours_over_codec_each"] = [round(a / b, 3) for a, b in zip(t_ours, t_lib)]
    log(f"  ours {row['ours_rps'] / 1e6:.2f} M rec/s, aiokafka "
        f"{row['aiokafka_rps'] / 1e6:.2f} M rec/s"
        + (f", ours/codec time {row['ours_over_codec']:.2f}" if t_lib else ""))
    return row


def bench_encode(fmt, table, records, codecs, repeat, slow_records, results):
    for codec in codecs:
        results["encode"].append(_encode_one(fmt, table, records, codec, repeat,
                                             slow_records))


def _encode_one(fmt, table, records, codec, repeat, slow_records) -> dict:
    AioMemoryRecords = aiokafka_classes()
    n = table.num_rows
    expected = expected_checksum(table)
    slow = records[:slow_records]
    cid = CODEC_IDS[codec]
    row = {"codec": codec, "records": n, "aiokafka_level": AIOKAFKA_LEVELS[codec],
           "ours_level": OUR_DEFAULT_LEVELS[codec]}

    # correctness, untimed: aiokafka reads our output back (CRCs checked), and so do we
    data = fmt.encode(table, compression=codec, max_batch_bytes=16384)
    got = iterate_records(AioMemoryRecords, data)
    if got != expected:
        raise AssertionError(f"encode {codec}: aiokafka reads back {got}, "
                             f"expected {expected}")
    check_equal(fmt.decode(data), table, f"encode {codec} -> decode")
    for pos, size in _data.split_batches(data):
        if size > 16384:
            raise AssertionError(f"encode {codec}: batch at {pos} has {size} bytes > 16384")
    row["ours_bytes"] = len(data)
    del data

    def ours():
        return len(fmt.encode(table, compression=codec, max_batch_bytes=16384))

    def aiokafka():
        return sum(len(b) for b in _data.build_batches(records, "aiokafka", cid, 16384))

    def kafka_python():
        return sum(len(b) for b in _data.build_batches(slow, "kafka-python", cid, 16384))

    t_ours, t_aio, t_kp = [], [], []
    for _ in range(repeat):
        t, _ = timed(ours, 1)
        t_ours.append(t)
        t, row["aiokafka_bytes"] = timed(aiokafka, 1)
        t_aio.append(t)
    for _ in range(max(1, min(repeat, 3))):
        t, _ = timed(kafka_python, 1)
        t_kp.append(t)
    row["ours_s"] = statistics.median(t_ours)
    row["aiokafka_s"] = statistics.median(t_aio)
    row["kafka_python_s"] = statistics.median(t_kp)
    row["kafka_python_records"] = len(slow)
    row["ours_rps"] = rate(n, row["ours_s"])
    row["aiokafka_rps"] = rate(n, row["aiokafka_s"])
    row["kafka_python_rps"] = rate(len(slow), row["kafka_python_s"])
    row["vs_aiokafka"] = row["ours_rps"] / row["aiokafka_rps"]
    row["vs_kafka_python"] = row["ours_rps"] / row["kafka_python_rps"]
    row["size_vs_aiokafka"] = row["ours_bytes"] / row["aiokafka_bytes"]
    log(f"encode {codec}: ours {row['ours_rps'] / 1e6:.2f} M rec/s, aiokafka "
        f"{row['aiokafka_rps'] / 1e6:.2f} M rec/s")
    return row


def acceptance(results) -> list[dict]:
    """The speed targets of issue 2, evaluated on this run's ratios."""
    checks = []
    for row in results["decode"]:
        c = row["codec"]
        if c in DECODE_VS_AIOKAFKA_MIN:
            checks.append({"what": f"decode {c} vs aiokafka", "value": row["vs_aiokafka"],
                           "target": f">= {DECODE_VS_AIOKAFKA_MIN[c]}x",
                           "ok": row["vs_aiokafka"] >= DECODE_VS_AIOKAFKA_MIN[c]})
        if c in CODEC_OVERHEAD_LIMIT:
            checks.append({"what": f"decode {c} time / codec time",
                           "value": row["ours_over_codec"],
                           "target": f"<= {CODEC_OVERHEAD_LIMIT[c]}x",
                           "ok": row["ours_over_codec"] <= CODEC_OVERHEAD_LIMIT[c]})
    for row in results["encode"]:
        c = row["codec"]
        if c in ENCODE_VS_AIOKAFKA_MIN:
            value = row["vs_aiokafka"]
            checks.append({"what": f"encode {c} vs aiokafka", "value": value,
                           "target": f">= {ENCODE_VS_AIOKAFKA_MIN[c]}x",
                           "ok": value >= ENCODE_VS_AIOKAFKA_MIN[c]})
    return checks


def mrps(x: float) -> str:
    return f"{x / 1e6:8.3f}M"


def print_table(results, out=sys.stdout) -> None:
    cfg = results["config"]
    p = lambda *a: print(*a, file=out)  # noqa: E731
    p(f"spark_kafkalog format benchmark: {cfg['records']:,} records, {cfg['batch_bytes']} B "
      f"batches, median of {cfg['repeat']} (kafka-python: first {cfg['slow_records']:,} "
      f"records); load avg {cfg['loadavg_start']} -> {cfg['loadavg_end']}")
    p("")
    p("decode (records/s)      ours    aiokafka  kafka-py  codec-lib | x aiokafka  x kafka-py"
      "  ours/codec time")
    for r in results["decode"]:
        codec_rps = mrps(r["codec_rps"]) if "codec_rps" in r else "        -"
        over = f"{r['ours_over_codec']:14.2f}x" if "ours_over_codec" in r else "              -"
        p(f"  {r['codec']:<8} {mrps(r['ours_rps'])} {mrps(r['aiokafka_rps'])} "
          f"{mrps(r['kafka_python_rps'])} {codec_rps} | {r['vs_aiokafka']:9.1f}x "
          f"{r['vs_kafka_python']:10.1f}x {over}")
    p("")
    p("encode (records/s)      ours    aiokafka  kafka-py | x aiokafka  x kafka-py  "
      "bytes ours/aio  level ours/aio")
    for r in results["encode"]:
        p(f"  {r['codec']:<8} {mrps(r['ours_rps'])} {mrps(r['aiokafka_rps'])} "
          f"{mrps(r['kafka_python_rps'])} | {r['vs_aiokafka']:9.1f}x "
          f"{r['vs_kafka_python']:10.1f}x  {r['size_vs_aiokafka']:14.2f}  "
          f"{r['ours_level']}/{r['aiokafka_level']}")
    p("")
    p("acceptance (issue 2):")
    for c in results["acceptance"]:
        p(f"  {'PASS' if c['ok'] else 'MISS'}  {c['what']:<38} {c['value']:7.2f}x "
          f"(target {c['target']})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5,
                    help="repetitions per measurement; the median is reported")
    ap.add_argument("--slow-records", type=int, default=100_000,
                    help="records kafka-python (pure Python) is timed on")
    ap.add_argument("--decode-codecs", default="none,gzip,snappy,lz4,zstd")
    ap.add_argument("--encode-codecs", default="none,lz4,zstd")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--strict", action="store_true",
                    help="exit 1 when a speed target is missed (cross-check failures "
                         "always exit non-zero)")
    args = ap.parse_args(argv)

    from spark_kafkalog import format as fmt

    n = args.records
    slow = min(args.slow_records, n)
    loadavg_start = tuple(round(x, 2) for x in os.getloadavg())
    log(f"generating {n:,} records ...")
    table = _data.make_table(n)
    records = _data.to_records(table)
    # The 1M tuples are immortal for this run: keep the cyclic GC from re-walking them
    # during every timed section (it would bill the Python decoders for our setup).
    gc.collect()
    gc.freeze()

    results = {
        "config": {"records": n, "repeat": args.repeat, "slow_records": slow,
                   "batch_bytes": 16384, "loadavg_start": loadavg_start,
                   "python": sys.version.split()[0], "cpus": os.cpu_count(),
                   "value_bytes_mean": round(
                       pc.mean(pc.binary_length(table.column("value"))).as_py(), 1)},
        "decode": [], "encode": [],
    }
    decode_codecs = [c for c in args.decode_codecs.split(",") if c]
    encode_codecs = [c for c in args.encode_codecs.split(",") if c]
    for c in decode_codecs + encode_codecs:
        if c not in CODEC_IDS:
            ap.error(f"unknown codec {c!r}")
    bench_decode(fmt, table, records, decode_codecs, args.repeat, slow, results)
    bench_encode(fmt, table, records, encode_codecs, args.repeat, slow, results)
    results["config"]["loadavg_end"] = tuple(round(x, 2) for x in os.getloadavg())
    results["acceptance"] = acceptance(results)

    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
    else:
        print_table(results)
    missed = [c for c in results["acceptance"] if not c["ok"]]
    return 1 if (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())

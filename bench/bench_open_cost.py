#!/usr/bin/env python
"""What a slice costs to open on an executor, in bytes of reading: the measurement behind
``packing.DEFAULT_OPEN_COST_BYTES`` (``openCostInBytes``).

The same ``--records`` small records (``jobs/make_sample_log.py``, codec none) are written
as ``--few`` and as ``--many`` topic-partitions (one slice each). In this one process,
without Spark, all slices of each log are read as ONE packed task through the reader
Spark runs (``KafkaLogReader.read``, prefetch off so every cost lands in this thread),
and each batch it yields is written as an Arrow IPC stream to a null sink, as Spark's
Python worker does with it. CPU time of the process (``time.process_time``: the machine
is shared, wall time is not this process's), median of ``--repeat``.

    per byte  = time(few) / bytes(few)
    per slice = (time(many) - per byte * bytes(many)) / (slices(many) - slices(few))
    open cost = per slice / per byte

    python bench/bench_open_cost.py [--records 1000000] [--few 10] [--many 2000]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def read_cpu(logdir: str, repeat: int) -> tuple[int, int, int, float]:
    """(slices, on-disk bytes, rows, median CPU seconds) of reading every slice of the
    topic as one packed task."""
    import pyarrow as pa

    import spark_kafkalog.spark.reader as reader_mod
    from spark_kafkalog.spark.options import parse_read_options
    from spark_kafkalog.spark.packing import PackedSlices
    from spark_kafkalog.spark.reader import KafkaLogReader

    reader_mod.PREFETCH_BATCHES = 0
    reader = KafkaLogReader(parse_read_options({"path": logdir, "subscribe": "bench",
                                                "packPartitions": "false"}))
    slices = reader.partitions()
    task = PackedSlices(tuple(slices)) if len(slices) > 1 else slices[0]

    def once() -> tuple[int, float]:
        rows = 0
        t0 = time.process_time()
        sink = pa.MockOutputStream()
        writer = None
        for batch in reader.read(task):
            if writer is None:
                writer = pa.ipc.new_stream(sink, batch.schema)
            writer.write_batch(batch)
            rows += batch.num_rows
        writer.close()
        return rows, time.process_time() - t0

    once()                                          # warm: page cache, imports
    runs = [once() for _ in range(repeat)]
    return (len(slices), sum(s.est_bytes for s in slices), runs[0][0],
            statistics.median(t for _, t in runs))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--few", type=int, default=10)
    ap.add_argument("--many", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)

    from spark_kafkalog.jobs.make_sample_log import make_sample_log

    with tempfile.TemporaryDirectory(prefix="kafkalog-bench-open-") as tmp:
        got = {}
        for n in (args.few, args.many):
            root = Path(tmp) / f"log-{n}"
            make_sample_log(root, records=args.records, partitions=n, topic="bench",
                            segment_bytes=8 << 20, codecs=("none",))
            got[n] = read_cpu(str(root), args.repeat)
            s, b, r, t = got[n]
            print(f"{s:6,} slices  {b / 1e6:7.1f} MB  {r:,} rows  {t:6.3f} s CPU", flush=True)
    s1, b1, _, t1 = got[args.few]
    s2, b2, _, t2 = got[args.many]
    per_byte = t1 / b1
    per_slice = (t2 - per_byte * b2) / (s2 - s1)
    print(f"\nper byte {1 / per_byte / 1e6:.0f} MB/s of CPU; per slice {per_slice * 1e3:.3f} ms;"
          f" open cost {per_slice / per_byte / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""Driver-side planning of many small topic-partitions, in process (no Spark).

``KafkaLogReader(...).partitions()`` of a whole topic (listing, checkpoints, tail scans,
slices, packing) on logs written by ``jobs/make_sample_log.py`` (codec none): the same
``--records`` as each of ``--counts`` topic-partitions (segments of ``--segment-bytes``;
the default 1 MiB gives one segment a partition at 2,000). Process CPU time
(``time.process_time``: the machine is shared), median of ``--repeat``, per partition.
``--logs DIR`` keeps the logs there (built once) so that two checkouts can be compared on
the same bytes, alternately; ``--profile`` prints cProfile's top functions of one plan.

    python bench/bench_planning.py [--counts 10,2000] [--logs /tmp/plan-logs] [--profile]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def ensure_log(root: Path, records: int, partitions: int, segment_bytes: int) -> str:
    from spark_kafkalog.jobs.make_sample_log import make_sample_log

    if not (root / "SAMPLE.json").exists():
        make_sample_log(root, records=records, partitions=partitions, topic="bench",
                        segment_bytes=segment_bytes, codecs=("none",))
    return str(root)


def plan_cpu(logdir: str, repeat: int) -> tuple[int, float, float]:
    """(input partitions, median and least CPU seconds) of planning a read of the whole
    topic (the least is the one other processes disturbed least)."""
    from spark_kafkalog.spark.options import parse_read_options
    from spark_kafkalog.spark.reader import KafkaLogReader

    opts = parse_read_options({"path": logdir, "subscribe": "bench"})
    KafkaLogReader(opts).partitions()              # warm: page cache, imports
    times, n = [], 0
    for _ in range(repeat):
        t0 = time.process_time()
        n = len(KafkaLogReader(opts).partitions())
        times.append(time.process_time() - t0)
    return n, statistics.median(times), min(times)


def profile(logdir: str) -> None:
    import cProfile
    import pstats

    from spark_kafkalog.spark.options import parse_read_options
    from spark_kafkalog.spark.reader import KafkaLogReader

    opts = parse_read_options({"path": logdir, "subscribe": "bench"})
    KafkaLogReader(opts).partitions()
    prof = cProfile.Profile()
    prof.runcall(lambda: KafkaLogReader(opts).partitions())
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--counts", default="10,2000")
    ap.add_argument("--segment-bytes", type=int, default=1 << 20)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--logs", help="keep the logs in this directory (reused when present)")
    ap.add_argument("--profile", action="store_true",
                    help="cProfile one plan of the largest count")
    args = ap.parse_args(argv)

    counts = [int(c) for c in args.counts.split(",") if c.strip()]
    tmp = None if args.logs else tempfile.TemporaryDirectory(prefix="kafkalog-bench-plan-")
    work = Path(args.logs or tmp.name)
    try:
        print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
        for n in counts:
            logdir = ensure_log(work / f"log-{args.records}-{n}-{args.segment_bytes}",
                                args.records, n, args.segment_bytes)
            tasks, t, least = plan_cpu(logdir, args.repeat)
            print(f"{n:7,} partitions -> {tasks:5} input partitions: {t * 1e3:8.1f} ms CPU "
                  f"(least {least * 1e3:.1f}), {t / n * 1e3:.3f} ms a partition", flush=True)
        if args.profile:
            profile(str(work / f"log-{args.records}-{max(counts)}-{args.segment_bytes}"))
        print(f"load average {os.getloadavg()[0]:.1f}")
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())

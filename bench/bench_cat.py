"""``kafkalog cat`` and ``kafkalog dump --print-data-log`` against kcat and Kafka's own
kafka-dump-log, on one 2,000,000-record segment.

* ``kafkalog cat -f '%o %k %s\\n'`` and ``-J`` on a log dir holding the segment, to
  /dev/null, against kcat (Debian's package, librdkafka) consuming the same records from a
  local broker (``-C -e -f ...``, to /dev/null);
* ``kafkalog dump --print-data-log`` against Kafka 4.4's ``DumpLogSegments
  --print-data-log`` on the same segment file, to /dev/null.

Records: bench/_data.py's (16-byte keys, ~120-byte values, headers on one in five), one
partition, uncompressed. Prints seconds, records/s and ratios. One run; a shared machine
makes the numbers noisy. Usage: ``python bench/bench_cat.py [--records N] [--no-broker]``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._data import make_table  # noqa: E402
from tests.kafka.broker import JAVA, KAFKA44, Broker, KafkaTool, classpath  # noqa: E402

PY = sys.executable


def run(label: str, cmd: list[str], n: int, results: dict) -> float:
    """CPU seconds (user + system) of ``cmd`` with stdout to /dev/null; wall seconds are
    printed too (on a loaded machine they measure the machine, CPU time the program)."""
    with open(os.devnull, "wb") as null, tempfile.TemporaryFile() as errf:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=null, stderr=errf)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            errf.seek(0)
            raise SystemExit(f"{label} failed: {errf.read().decode(errors='replace')[-2000:]}")
    cpu = usage.ru_utime + usage.ru_stime
    results[label] = (cpu, wall)
    print(f"{label:<50} cpu {cpu:7.2f} s {n / cpu:12,.0f} rec/s   wall {wall:7.2f} s "
          f"{n / wall:12,.0f} rec/s", flush=True)
    return cpu


def produce(bootstrap: str, table, topic: str) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000, "compression.codec": "none"})
    keys, values = table.column("key").to_pylist(), table.column("value").to_pylist()
    for k, v in zip(keys, values):
        while True:
            try:
                p.produce(topic, key=k, value=v, partition=0)
                break
            except BufferError:
                p.poll(0.05)
    if p.flush(300) != 0:
        raise SystemExit("the producer did not deliver every record")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--no-broker", action="store_true", help="skip kcat (no broker)")
    args = ap.parse_args(argv)
    n = args.records
    home = Path(tempfile.mkdtemp(prefix="bench-cat-"))
    results: dict[str, tuple[float, float]] = {}
    try:
        from spark_kafkalog.log.write.table import write_table
        table = make_table(n).select(["key", "value", "timestamp"])
        logdir = home / "logs"
        write_table(str(logdir), "bench", table.append_column(
            "partition", __import__("pyarrow").array([0] * n, "int32")))
        segs = sorted((logdir / "bench-0").glob("*.log"))
        size = sum(s.stat().st_size for s in segs)
        print(f"{n:,} records, {len(segs)} segment(s), {size / 1e6:.0f} MB", flush=True)
        fmt = "%o %k %s\\n"
        run("kafkalog cat -f '%o %k %s\\n'", [PY, "-m", "spark_kafkalog.cli", "cat",
            str(logdir), "-t", "bench", "-q", "-f", fmt], n, results)
        run("kafkalog cat -J", [PY, "-m", "spark_kafkalog.cli", "cat", str(logdir), "-t",
            "bench", "-q", "-J"], n, results)
        run("kafkalog dump --print-data-log", [PY, "-m", "spark_kafkalog.cli", "dump",
            "--print-data-log", "--files", ",".join(map(str, segs))], n, results)
        run("kafka-dump-log.sh --print-data-log (Kafka 4.4)",
            [JAVA, "-Xmx1g", "-cp", classpath(kafka=KAFKA44), KAFKA44.dump_log,
             "--print-data-log", "--files", ",".join(map(str, segs))], n, results)
        if not args.no_broker:
            broker = Broker(home / "broker", heap="1g")
            broker.start()
            try:
                KafkaTool(broker, home / "tool").create_topics(
                    [{"topic": "bench", "partitions": 1}])
                t0 = time.perf_counter()
                produce(broker.bootstrap, table, "bench")
                print(f"(produced to the broker in {time.perf_counter() - t0:.1f} s)")
                for label, extra in (("kcat -C -e -f '%o %k %s\\n'", ["-f", fmt]),
                                     ("kcat -C -e -J", ["-J"])):
                    run(label, ["kcat", "-C", "-b", broker.bootstrap, "-t", "bench", "-p", "0",
                                "-o", "beginning", "-e", "-q", *extra], n, results)
            finally:
                broker.stop()
        print()
        pairs = [("kafkalog cat -f '%o %k %s\\n'", "kcat -C -e -f '%o %k %s\\n'"),
                 ("kafkalog cat -J", "kcat -C -e -J"),
                 ("kafkalog dump --print-data-log",
                  "kafka-dump-log.sh --print-data-log (Kafka 4.4)")]
        for ours, theirs in pairs:
            if ours in results and theirs in results:
                (c1, w1), (c2, w2) = results[ours], results[theirs]
                print(f"{ours} vs {theirs}: {c2 / c1:.2f}x the speed by CPU time, "
                      f"{w2 / w1:.2f}x by wall time")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

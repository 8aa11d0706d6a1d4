"""Benchmark timing shared by the codec bench scripts (bench_avro, bench_protobuf,
bench_proto_write): contenders run in alternating rounds, so a burst of load on the shared
machine hits them all alike, and each is reported by its median wall and CPU time."""
from __future__ import annotations

import statistics
import time


def timed(fn):
    """``fn()``'s result, wall seconds and this process's CPU seconds."""
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def medians(contenders: dict, repeat: int) -> dict[str, tuple[float, float]]:
    """Each contender's median (wall, CPU) seconds over ``repeat`` rounds."""
    runs = {k: [] for k in contenders}
    for _ in range(repeat):
        for name, fn in contenders.items():
            _, wall, cpu = timed(fn)
            runs[name].append((wall, cpu))
    return {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
            for k, v in runs.items()}


def print_rates(med: dict, n: int, width: int, places: int):
    """One line a contender: ``n`` records in its median CPU and wall time."""
    for name, (wall, cpu) in med.items():
        print(f"  {name:{width}s} {n / cpu / 1e6:8.{places}f} M records/s (CPU)  "
              f"{n / wall / 1e6:8.{places}f} M/s (wall)")


def print_ratio(med: dict, name: str, ours: str = "ours"):
    """How many times ``ours`` is as fast as ``name``, by CPU and by wall time."""
    print(f"  {ours} / {name}: {med[name][1] / med[ours][1]:.1f}x (CPU), "
          f"{med[name][0] / med[ours][0]:.1f}x (wall)")

"""Bounded I/O and memory on large partitions (marked slow).

- Reading the last 1% of a >= 100 MiB partition, by offset and by timestamp, reads at
  most 5% of its bytes (counted through a wrapping filesystem; the planning calls —
  ``state``, ``offset_for_timestamp`` — are counted too).
- Peak RSS while reading a 1 GiB segment stays under 300 MB (a subprocess reports its
  ru_maxrss).
"""
import json
import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

from spark_kafkalog.log import LogDirs, ReadStats, read_partition

from .fsutil import CountingFileSystem
from .logbuilder import write_large_partition

pytestmark = pytest.mark.slow

MiB = 1 << 20


@pytest.fixture(scope="module")
def big_partition(tmp_path_factory):
    root = tmp_path_factory.mktemp("big")
    info = write_large_partition(root, "big.topic", 0, total_bytes=120 * MiB,
                                 segment_bytes=32 * MiB, batch_records=100, value_bytes=200)
    # the active segment's indexes preallocated as a live broker leaves them (10 MiB)
    base, log_path, _ = info["segments"][-1]
    for suffix, size in ((".index", 10 * MiB), (".timeindex", 10 * MiB - 4)):
        path = log_path.with_suffix(suffix)
        with open(path, "ab") as f:
            f.truncate(size)
    return root, info


def _read_all(logdirs, p, start, end, stats):
    return pa.Table.from_batches(list(read_partition(logdirs, p, start_offset=start,
                                                     end_offset=end, stats=stats)))


def test_last_percent_by_offset_reads_little(big_partition):
    root, info = big_partition
    total = sum(size for _, _, size in info["segments"])
    assert total >= 100 * MiB and len(info["segments"]) == 4
    counting = CountingFileSystem()
    logdirs = LogDirs(str(root), filesystem=counting.fs)
    p = logdirs.partition("big.topic", 0)
    s = logdirs.state(p)
    assert s.log_end_offset == info["log_end_offset"] == s.high_watermark
    start = s.log_end_offset - s.log_end_offset // 100
    t = _read_all(logdirs, p, start, s.upper_bound, ReadStats())
    assert t.num_rows == s.log_end_offset - start
    assert t.column("offset")[0].as_py() == start
    ratio = counting.bytes_read / total
    print(f"\nby offset: read {counting.bytes_read} of {total} bytes ({ratio:.2%}) "
          f"in {counting.reads} reads")
    assert ratio <= 0.05


def test_last_percent_by_timestamp_reads_little(big_partition):
    root, info = big_partition
    total = sum(size for _, _, size in info["segments"])
    counting = CountingFileSystem()
    logdirs = LogDirs(str(root), filesystem=counting.fs)
    p = logdirs.partition("big.topic", 0)
    s = logdirs.state(p)
    batches = info["batches"]
    target_batch = batches - batches // 100
    ts = info["base_timestamp"] + target_batch * info["ts_step"]
    start = logdirs.offset_for_timestamp(p, ts, upper_bound=s.upper_bound)
    assert start == target_batch * 100
    t = _read_all(logdirs, p, start, s.upper_bound, ReadStats())
    assert t.num_rows == s.log_end_offset - start
    ratio = counting.bytes_read / total
    print(f"\nby timestamp: read {counting.bytes_read} of {total} bytes ({ratio:.2%}) "
          f"in {counting.reads} reads")
    assert ratio <= 0.05


_RSS_SCRIPT = textwrap.dedent("""
    import json, resource, sys
    from spark_kafkalog.log import LogDirs, ReadStats, read_partition
    root = sys.argv[1]
    logdirs = LogDirs(root)
    p = logdirs.partition("huge", 0)
    s = logdirs.state(p)
    stats = ReadStats()
    rows = 0
    for batch in read_partition(logdirs, p, start_offset=s.log_start_offset,
                                end_offset=s.upper_bound, stats=stats):
        rows += batch.num_rows
    # ru_maxrss survives execve on Linux: it would include the pytest parent's peak.
    # VmHWM belongs to this process's own address space, made new by exec.
    try:
        with open("/proc/self/status") as f:
            peak_kb = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"rows": rows, "bytes": stats.bytes_read, "size": s.size_bytes,
                      "maxrss_kb": peak_kb}))
""")


def test_peak_rss_reading_a_1gib_segment(tmp_path):
    info = write_large_partition(tmp_path, "huge", 0, total_bytes=1 << 30,
                                 segment_bytes=(1 << 30) + MiB, batch_records=200,
                                 value_bytes=400, write_checkpoints=False)
    try:
        assert len(info["segments"]) == 1 and info["segments"][0][2] >= (1 << 30) - MiB
        out = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, str(tmp_path)],
                             capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONPATH": os.getcwd()})
        result = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"\n1 GiB segment: {result['rows']} rows, read {result['bytes']} bytes, "
              f"peak RSS {result['maxrss_kb'] / 1024:.0f} MiB")
        assert result["rows"] == info["records"]
        assert result["maxrss_kb"] * 1024 < 300 * 1000 * 1000
    finally:
        for _, path, _ in info["segments"]:
            os.unlink(path)

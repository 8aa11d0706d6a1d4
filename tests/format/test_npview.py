"""format.npview: Arrow -> numpy without pyarrow's pandas-backed to_numpy."""
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from spark_kafkalog.format.npview import column, to_numpy

CASES = [
    pa.array([1, -2, 3], pa.int8()),
    pa.array([1, 2, 3], pa.int32()),
    pa.array([2**40, -5], pa.int64()),
    pa.array([7, 8], pa.uint16()),
    pa.array([1.5, -2.0], pa.float64()),
    pa.array([1, 2], pa.timestamp("ms")),
    pa.array([1, 2], pa.timestamp("us", tz="UTC")),
    pa.array([True, False, True, True, False, False, False, True, True, False], pa.bool_()),
    pa.array([], pa.int64()),
    pa.array([], pa.bool_()),
    pa.array([1, None, 3], pa.int64()),            # nulls: pyarrow's own conversion
    pa.array([b"a", None], pa.binary()),
]


@pytest.mark.parametrize("arr", CASES, ids=lambda a: f"{a.type}-{len(a)}-{a.null_count}")
def test_matches_pyarrow(arr):
    want = arr.to_numpy(zero_copy_only=False)
    got = to_numpy(arr)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("arr", [a for a in CASES if len(a) > 1 and not a.null_count],
                         ids=str)
def test_slices_and_chunks(arr):
    for start in range(len(arr)):
        for stop in range(start, len(arr) + 1):
            sl = arr.slice(start, stop - start)
            np.testing.assert_array_equal(to_numpy(sl), sl.to_numpy(zero_copy_only=False))
    # bit-packed booleans at every bit offset, and several chunks
    chunked = pa.chunked_array([arr.slice(1), arr, arr.slice(0, 1)])
    np.testing.assert_array_equal(to_numpy(chunked),
                                  chunked.to_numpy())
    assert to_numpy(pa.chunked_array([], arr.type)).dtype == arr.to_numpy(
        zero_copy_only=False).dtype


def test_long_bool_offsets():
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2, 1000).astype(bool)
    arr = pa.array(bits)
    for off in (0, 1, 7, 8, 9, 63, 500):
        np.testing.assert_array_equal(to_numpy(arr.slice(off, 333)), bits[off:off + 333])


def test_column_of_table_and_batch():
    t = pa.table({"a": pa.chunked_array([[1, 2], [3]], pa.int64())})
    np.testing.assert_array_equal(column(t, "a"), [1, 2, 3])
    np.testing.assert_array_equal(column(t.to_batches()[0], "a"), [1, 2])


def test_no_pandas_import_on_the_read_and_write_paths(tmp_path):
    """Reading a log (scan, plan, decode) and writing one never imports pandas: pyarrow's
    to_numpy would (0.7 s and ~40k objects per Spark worker). The input comes from an
    Arrow IPC file: building it from Python lists or numpy would import pandas itself."""
    t = pa.table({"key": [b"k%d" % i for i in range(5000)], "value": [b"v" * 50] * 5000})
    rows = [pa.array(range(p, 5000, 2), pa.int64()) for p in range(2)]
    src = tmp_path / "input.arrow"
    with pa.OSFile(str(src), "wb") as f:
        w = pa.ipc.new_file(f, t.schema)
        w.write_table(t)
        w.close()
    for p in range(2):
        with pa.OSFile(str(tmp_path / f"rows{p}.arrow"), "wb") as f:
            w = pa.ipc.new_file(f, pa.schema([("r", pa.int64())]))
            w.write_table(pa.table({"r": rows[p]}))
            w.close()
    root = tmp_path / "log"
    code = f"""
import sys
import pyarrow as pa
from spark_kafkalog.format import encode_batches
from spark_kafkalog.log import LogDirs, read_partition
from spark_kafkalog.log.write import StagingWriter, TopicSpec, commit_write, AppendConfig
from spark_kafkalog.log.io import resolve_filesystem
from spark_kafkalog.spark.options import parse_read_options
from spark_kafkalog.spark.planning import plan
from spark_kafkalog.spark.reader import open_logdirs, read_slice
root = {str(root)!r}
fs, r = resolve_filesystem(root, {{}})
t = pa.ipc.open_file(pa.memory_map({str(src)!r})).read_all()
assert "pandas" not in sys.modules
sw = StagingWriter(fs, r, "w1", "t0", per_partition_files=True)
for p in range(2):
    rows = pa.ipc.open_file(pa.memory_map(f"{tmp_path}/rows{{p}}.arrow")).read_all()
    data, index = encode_batches(t, rows=rows.column(0), max_batch_bytes=4096)
    sw.add("topic", p, data, index)
commit_write(fs, r, "w1", [sw.finish()], [TopicSpec("topic", partitions_if_new=2)],
             mode="append", config=AppendConfig(fsync=False))
opts = parse_read_options({{"path": root, "subscribe": "topic",
                            "maxRecordsPerPartition": "1000"}})
ld = open_logdirs(opts)
n = sum(b.num_rows for s in plan(ld, opts) for b in read_slice(ld, opts, s))
assert n == 5000, n
print("pandas" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip().splitlines()
    assert out[-1] == "False"

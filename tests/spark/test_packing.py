"""Packing small slices into one Spark task (spark/packing.py)."""
from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from spark_kafkalog.log import LogDirs
from spark_kafkalog.spark.options import parse_read_options
from spark_kafkalog.spark.packing import PackedSlices, default_open_cost, pack_slices
from spark_kafkalog.spark.planning import LogSlice, plan
from spark_kafkalog.spark.reader import KafkaLogReader
from tests.spark.fakes import FakeLogDirs, fake_split_points

MB = 1 << 20


@pytest.fixture(autouse=True)
def _two_cores(monkeypatch):
    """Packing spreads over the planning machine's cores: make it 2 (local[2])."""
    monkeypatch.setattr("spark_kafkalog.spark.packing.os.cpu_count", lambda: 2)


def many_small(n=40, size=100_000, records=1000):
    return FakeLogDirs({("a", p): [(0, records, size)] for p in range(n)})


def tasks(logdirs, **opts):
    from tests.spark.test_planning import fake_batch_rows

    o = parse_read_options({"path": "/fake", "subscribe": "a", **opts})
    out = plan(logdirs, o, split_points=fake_split_points, count=fake_batch_rows)
    for t in out:
        assert pickle.loads(pickle.dumps(t)) == t
    return out


def flat(ts):
    return [s for t in ts for s in (t.slices if isinstance(t, PackedSlices) else (t,))]


def key(s):
    return (s.topic, s.partition, s.start_offset, s.end_offset)


def test_small_partitions_share_tasks_and_every_slice_is_planned_once():
    packed = tasks(many_small(), maxPartitionBytes="1m", openCostInBytes="100k")
    unpacked = tasks(many_small(), packPartitions="false")
    assert len(unpacked) == 40 and all(isinstance(t, LogSlice) for t in unpacked)
    # a slice joins while the task's bytes (each earlier slice + 100 KiB of open cost)
    # plus its own stay within 1 MiB: 4 * 202,400 + 100,000 <= 1 MiB -> 5 slices a task
    assert len(packed) == 8
    assert sorted(map(key, flat(packed))) == sorted(map(key, unpacked))
    for t in packed:
        assert isinstance(t, PackedSlices)
        assert t.est_bytes <= MB
        assert [key(s) for s in t.slices] == sorted(key(s) for s in t.slices)


def test_large_partitions_are_still_split_and_not_packed():
    logdirs = FakeLogDirs({("a", 0): [(0, 10_000, 10 * MB)], ("a", 1): [(0, 10, 1000)],
                           ("a", 2): [(0, 10, 1000)]})
    ts = tasks(logdirs, maxPartitionBytes="2m", openCostInBytes="64k")
    big = [t for t in ts if isinstance(t, LogSlice) and t.partition == 0]
    assert len(big) >= 4                       # 10 MB in 2 MB pieces, each a task alone
    small = [t for t in ts if isinstance(t, PackedSlices)]
    assert len(small) == 1 and {s.partition for s in small[0].slices} == {1, 2}


def test_max_records_per_partition_caps_packed_tasks():
    ts = tasks(many_small(10, records=1000), maxRecordsPerPartition="2500")
    assert all(t.est_records <= 2500 for t in ts)
    assert len(ts) == 5                        # two 1,000-record partitions a task
    assert sum(t.est_records for t in ts) == 10_000


def test_min_partitions_keeps_at_least_that_many_tasks():
    ts = tasks(many_small(40), minPartitions="20")
    assert len(ts) >= 20
    assert sorted(map(key, flat(ts))) == sorted(map(key, tasks(many_small(40),
                                                               packPartitions="false")))
    # more than the slices: minPartitions splits (as before), packing leaves it alone
    ts = tasks(many_small(4), minPartitions="12")
    assert len(ts) >= 12 and all(isinstance(t, LogSlice) for t in ts)


def test_packing_options_parse(monkeypatch):
    o = parse_read_options({"path": "/x", "subscribe": "a"})
    assert o.pack_partitions and o.open_cost_bytes is None     # by filesystem at planning
    assert (default_open_cost(True), default_open_cost(False)) == (16 * 1024, 4 * MB)
    assert parse_read_options({"path": "/x", "subscribe": "a",
                               "openCostInBytes": "0"}).open_cost_bytes == 0
    monkeypatch.setenv("SPARK_KAFKALOG_PACK", "false")
    assert not parse_read_options({"path": "/x", "subscribe": "a"}).pack_partitions
    assert parse_read_options({"path": "/x", "subscribe": "a",
                               "packPartitions": "true"}).pack_partitions
    from spark_kafkalog.errors import InvalidOptionError
    with pytest.raises(InvalidOptionError, match="openCostInBytes"):
        parse_read_options({"path": "/x", "subscribe": "a", "openCostInBytes": "lots"})


def _documented_task_count(sizes: list[int], *, open_cost: int, target: int = 128 * MB,
                           cores: int = 2) -> int:
    """Tasks for equal slices by the rule docs/PERFORMANCE.md and packing's docstring
    state (Spark's file-source rule), worked out in closed form: the target is
    min(maxPartitionBytes, max(openCost, sum(size + openCost) / cores)); a slice joins a
    task while the task's bytes (each earlier slice + openCost) plus its own size stay
    within the target."""
    size = sizes[0]
    assert all(s == size for s in sizes)
    target = min(target, max(open_cost, len(sizes) * (size + open_cost) // cores))
    per_task = (target - size) // (size + open_cost) + 1
    return -(-len(sizes) // per_task)


@pytest.mark.parametrize("n,size,expected", [
    (2000, 46_600, 2),      # bench_many_partitions' 2,000 partitions: 1,000 slices a task
    (3000, 100_000, 3),     # the 128 MiB target caps: 1,153 slices a task
    (10, 9_300_000, 2),     # its 10 partitions: 5 a task
])
def test_default_open_cost_gives_the_documented_task_count(n, size, expected):
    ts = tasks(many_small(n, size=size, records=500))
    assert len(ts) == expected == _documented_task_count([size] * n, open_cost=16 * 1024)
    # Spark's 4 MiB, the previous default, by the same rule: many more tasks
    old = tasks(many_small(n, size=size, records=500), openCostInBytes="4m")
    assert len(old) == _documented_task_count([size] * n, open_cost=4 * MB)


def test_pack_slices_alone_is_identity():
    assert pack_slices([], target_bytes=1, open_cost=0) == []


def test_packed_tasks_read_the_same_rows_in_offset_order(tmp_path):
    """Real files: 30 small partitions over 2 topics, read task by task through the
    reader packed and unpacked: the same rows, each topic-partition in offset order."""
    from spark_kafkalog.jobs.make_sample_log import make_sample_log

    roots = [tmp_path / "a", tmp_path / "b"]         # two log dirs (make_sample_log
    make_sample_log(roots[0], records=6000, partitions=20, topic="x", codecs=("none",))
    make_sample_log(roots[1], records=3000, partitions=10, topic="y", codecs=("lz4",))
    path = ",".join(map(str, roots))                 # replaces its output dir)

    def read_all(**opts):
        o = parse_read_options({"path": path, "subscribe": "x,y", **opts})
        reader = KafkaLogReader(o)
        parts = reader.partitions()
        batches = [b for t in parts for b in reader.read(t)]
        return len(parts), pa.Table.from_batches(batches)

    n_packed, packed = read_all()
    n_plain, plain = read_all(packPartitions="false")
    assert n_plain == 30 and n_packed < n_plain
    assert packed.num_rows == plain.num_rows == 9000
    cols = ["topic", "partition", "offset", "key", "value"]
    rows = sorted(zip(*(packed[c].to_pylist() for c in cols)))
    assert rows == sorted(zip(*(plain[c].to_pylist() for c in cols)))
    seen = {}
    for t, p, off in zip(*(packed[c].to_pylist() for c in ("topic", "partition", "offset"))):
        assert off > seen.get((t, p), -1)
        seen[(t, p)] = off
    assert LogDirs(path).topics() == ["x", "y"]


def test_a_packed_task_reads_what_its_slices_read_unpacked_row_for_row(tmp_path):
    """Each packed task's output (its slices' batches joined into larger ones) equals,
    row for row and in order, its slices read one by one as unpacked tasks; headers and
    read_committed included."""
    from spark_kafkalog.jobs.make_sample_log import make_sample_log

    make_sample_log(tmp_path, records=20_000, partitions=60, topic="x",
                    codecs=("none", "lz4"))
    for extra in ({}, {"includeHeaders": "true", "kafka.isolation.level": "read_committed"}):
        o = parse_read_options({"path": str(tmp_path), "subscribe": "x", **extra})
        reader = KafkaLogReader(o)
        packed = reader.partitions()
        assert 1 < len(packed) < 60 and all(isinstance(t, PackedSlices) for t in packed)
        total = 0
        for t in packed:
            got = pa.Table.from_batches(list(reader.read(t)))
            want = pa.Table.from_batches([b for s in t.slices for b in reader.read(s)])
            assert got.schema == want.schema
            assert got.equals(want)
            total += got.num_rows
        assert total == 20_000


def test_planning_reads_each_checkpoint_and_lists_each_root_once(tmp_path, monkeypatch):
    """Cheap planning: checkpoint files once per log dir, each root listed once, one
    listing per partition dir, however many partitions."""
    from spark_kafkalog.jobs.make_sample_log import make_sample_log
    from spark_kafkalog.log import io as logfs
    from spark_kafkalog.log.read import discovery as layout     # patched: what it calls

    roots = [tmp_path / "a", tmp_path / "b"]
    make_sample_log(roots[0], records=2000, partitions=40, topic="x", codecs=("none",))
    make_sample_log(roots[1], records=2000, partitions=40, topic="y", codecs=("none",))
    ckpts, listed = [], []
    real_ckpt, real_list = layout.read_checkpoint, layout.list_dir
    real_files = layout._dir_files      # a partition dir's listing (os.scandir locally)
    real_subdirs = layout._subdirs      # a root's listing (os.scandir locally)

    def counting_ckpt(fs, path):
        ckpts.append(path)
        return real_ckpt(fs, path)

    def counting_list(fs, path):
        listed.append(path)
        return real_list(fs, path)

    def counting_files(fs, path, infos):
        listed.append(path)
        return real_files(fs, path, infos)

    def counting_subdirs(fs, path):
        listed.append(path)
        return real_subdirs(fs, path)

    monkeypatch.setattr(layout, "read_checkpoint", counting_ckpt)
    monkeypatch.setattr(layout, "list_dir", counting_list)
    monkeypatch.setattr(layout, "_dir_files", counting_files)
    monkeypatch.setattr(layout, "_subdirs", counting_subdirs)
    path = ",".join(map(str, roots))
    ts = plan(LogDirs(path), parse_read_options({"path": path, "subscribe": "x,y"}))
    assert sum(t.est_records for t in ts) == 4000
    assert len(ckpts) == len(set(ckpts)) and len(ckpts) <= 3 * 2   # hw, log start, recovery point a root
    assert sorted(listed) == sorted([str(r) for r in roots] + [
        f"{r}/{t}-{p}" for r, t in zip(roots, "xy") for p in range(40)])
    assert logfs.list_dir is real_list


def test_coalesced_joins_small_batches_in_order():
    from spark_kafkalog.spark.reader import coalesced

    small = [pa.record_batch({"x": list(range(i * 10, i * 10 + 10))}) for i in range(25)]
    out = list(coalesced(iter(small), min_rows=40, max_bytes=1 << 30))
    assert [b.num_rows for b in out] == [40] * 6 + [10]
    assert pa.Table.from_batches(out)["x"].to_pylist() == list(range(250))
    big = pa.record_batch({"x": list(range(100))})
    assert list(coalesced(iter([big]), min_rows=40))[0] is big
    by_bytes = list(coalesced(iter(small), min_rows=10_000, max_bytes=small[0].nbytes * 3))
    assert [b.num_rows for b in by_bytes][:2] == [30, 30]


def _packed_read(path, monkeypatch, kernel: bool, reader_cls=KafkaLogReader, filters=(),
                 after_planning=None, **opts):
    """Every packed task of the topic read in this process with the packed kernel on or
    off (``reader.PACKED_KERNEL``): the table, and how many runs the kernel took."""
    from spark_kafkalog.log.read import packed
    from spark_kafkalog.spark import reader as reader_mod

    monkeypatch.setattr(reader_mod, "PACKED_KERNEL", kernel)
    monkeypatch.setattr(reader_mod, "PREFETCH_BATCHES", 0)
    taken = []
    real = packed.read_small

    def counting(*a, **kw):
        out = real(*a, **kw)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(packed, "read_small", counting)
    reader = reader_cls(parse_read_options({"path": str(path), "subscribe": "x", **opts}))
    if filters:
        assert not list(reader.pushFilters(list(filters)))
    tasks = reader.partitions()
    assert all(isinstance(t, PackedSlices) for t in tasks)
    if after_planning is not None:
        after_planning()
    batches = [b for t in tasks for b in reader.read(t)]
    return pa.Table.from_batches(batches), taken


@pytest.mark.parametrize("opts", [{}, {"includeHeaders": "true"}, {"windowBytes": "64k"}])
def test_the_packed_kernel_reads_what_the_slices_read_one_by_one(tmp_path, monkeypatch, opts):
    """Small partitions of several codecs: one kernel call per run gives the same table
    (rows, order, schema) as each slice read by read_partition; with a small window the
    runs are cut by bytes."""
    from spark_kafkalog.jobs.make_sample_log import make_sample_log

    make_sample_log(tmp_path, records=20_000, partitions=60, topic="x",
                    codecs=("none", "lz4", "zstd", "gzip"))
    got, taken = _packed_read(tmp_path, monkeypatch, True, **opts)
    want, none = _packed_read(tmp_path, monkeypatch, False, **opts)
    assert got.num_rows == 20_000 and got.schema == want.schema and got.equals(want)
    assert taken and all(taken) and not none
    if opts.get("windowBytes"):
        assert len(taken) > 5       # runs of at most 64 KiB of segments


def test_the_packed_kernel_applies_pushed_row_filters(tmp_path, monkeypatch):
    import datetime as dt

    from pyspark.sql.datasource import GreaterThanOrEqual, In

    from spark_kafkalog.jobs.make_sample_log import make_sample_log
    from spark_kafkalog.spark.reader import KafkaLogPushdownReader

    make_sample_log(tmp_path, records=6000, partitions=30, topic="x", codecs=("none",))
    everything, _ = _packed_read(tmp_path, monkeypatch, False)
    ts = sorted(everything.column("timestamp").to_pylist())[len(everything) // 2]
    filters = [GreaterThanOrEqual(("timestamp",), ts.astimezone(dt.timezone.utc)),
               In(("timestampType",), (0,))]
    got, taken = _packed_read(tmp_path, monkeypatch, True, KafkaLogPushdownReader, filters)
    want, _ = _packed_read(tmp_path, monkeypatch, False, KafkaLogPushdownReader, filters)
    assert all(taken) and 0 < got.num_rows < 6000 and got.equals(want)


@pytest.mark.parametrize("policy", ["fail", "skip", "stop"])
def test_a_damaged_segment_in_a_packed_task_reads_as_before(tmp_path, monkeypatch, policy):
    """A CRC mismatch in one small partition, made after planning: the run it is in goes
    the general way, so the read fails with the same message (file, position, offset,
    the option to set) or skips / stops exactly as slice by slice."""
    from spark_kafkalog.jobs.make_sample_log import make_sample_log
    from spark_kafkalog.errors import CorruptRecordError

    make_sample_log(tmp_path, records=6000, partitions=30, topic="x", codecs=("none",))
    seg = sorted((tmp_path / "x-7").glob("*.log"))[0]
    good = seg.read_bytes()

    def damage():
        data = bytearray(good)
        data[len(data) // 2] ^= 0x40
        seg.write_bytes(bytes(data))

    opts = {"onCorruption": policy}
    runs = {}
    for kernel in (True, False):
        seg.write_bytes(good)
        if policy == "fail":
            with pytest.raises(CorruptRecordError) as err:
                _packed_read(tmp_path, monkeypatch, kernel, after_planning=damage, **opts)
            runs[kernel] = str(err.value)
        else:
            runs[kernel] = _packed_read(tmp_path, monkeypatch, kernel,
                                        after_planning=damage, **opts)
    if policy == "fail":
        assert runs[True] == runs[False]
        assert "x-7" in runs[True] and "onCorruption=skip" in runs[True]
        return
    (got, taken), (want, _) = runs[True], runs[False]
    assert False in taken and True in taken      # only the damaged run went the other way
    assert 0 < got.num_rows < 6000 and got.equals(want)

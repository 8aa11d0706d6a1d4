"""Seeking by timestamp and offset, against brute force over the consumer's view."""
import random

import pytest

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.log import LogDirs, read_table
from spark_kafkalog.log.read.seek import window_has_records

from .logbuilder import LogDirBuilder, rec


def brute_force(table, ts_ms, upper=None):
    for o, t in zip(table.column("offset").to_pylist(),
                    table.column("timestamp").cast("int64").to_pylist()):
        if upper is not None and o >= upper:
            return None
        if t is not None and t >= ts_ms * 1000:
            return o
    return None


def build_times(root, *, seed=7, timeindex=True):
    rng = random.Random(seed)
    b = LogDirBuilder(root)
    p = b.partition("times", 0, index_interval_bytes=200, base_timestamp=10_000)
    ts = 10_000
    for seg in range(4):
        for _ in range(12):
            n = rng.randint(1, 6)
            recs = []
            for _ in range(n):
                ts += rng.randint(0, 40)
                # timestamps are not monotonic: producers' clocks disagree
                recs.append(rec(b"k", b"v" * rng.randint(1, 60), ts=ts - rng.randint(0, 90)))
            if rng.random() < 0.15:
                p.append(recs, log_append_time=ts + 5)
            else:
                p.append(recs, compression=rng.choice(["none", "gzip"]))
            if rng.random() < 0.2:
                p.gap(rng.randint(1, 4))
        if seg < 3:
            p.roll()
    p.log_start_offset = 3
    p.write_timeindex = timeindex
    b.write()
    return b, p


@pytest.mark.parametrize("timeindex", [True, False])
def test_offset_for_timestamp_is_offsets_for_times(tmp_path, timeindex):
    b, p = build_times(tmp_path / "logs", timeindex=timeindex)
    logdirs = LogDirs(str(b.roots[0]))
    part = logdirs.partition("times", 0)
    table = read_table(logdirs, "times")
    all_ts = [t // 1000 for t in table.column("timestamp").cast("int64").to_pylist()]
    probes = sorted(set(all_ts + [t + 1 for t in all_ts] + [t - 1 for t in all_ts]
                        + [0, 5, min(all_ts) - 100, max(all_ts), max(all_ts) + 1]))
    for ts in probes:
        assert logdirs.offset_for_timestamp(part, ts) == brute_force(table, ts), ts
    upper = table.column("offset")[len(table) // 2].as_py()
    for ts in probes[::7]:
        assert logdirs.offset_for_timestamp(part, ts, upper_bound=upper) == \
            brute_force(table, ts, upper), ts


def test_starting_timestamp_in_read_table(tmp_path):
    b, p = build_times(tmp_path / "logs")
    full = read_table(str(b.roots[0]), "times")
    ts = full.column("timestamp").cast("int64")[40].as_py() // 1000
    t = read_table(str(b.roots[0]), "times", starting_timestamp=ts,
                   starting_offsets={0: 0})
    first = brute_force(full, ts)
    assert t.column("offset")[0].as_py() == first
    assert t.num_rows == sum(1 for o in full.column("offset").to_pylist() if o >= first)
    assert read_table(str(b.roots[0]), "times", starting_timestamp=10 ** 13).num_rows == 0


def test_bad_timestamps(tmp_path):
    b, p = build_times(tmp_path / "logs")
    logdirs = LogDirs(str(b.roots[0]))
    part = logdirs.partition("times", 0)
    for bad in (-1, "5", 1.5, True):
        with pytest.raises(InvalidOptionError):
            logdirs.offset_for_timestamp(part, bad)


def test_real_broker_offsets_for_times(real_broker):
    for root, topic, part in [("kafka-0.10-magic1", "TEST-TOPIC", 0),
                              ("iechenyb-data", "string-key", 0),
                              ("niloufar-ldi-poc", "__consumer_offsets", 6),
                              ("donaldy-kafka-2.7.1", "__consumer_offsets", 39),
                              ("kafka-rust-testdata", "fetch1.mytopic.1p.gzip.kafka.0821", 0)]:
        logdirs = LogDirs(str(real_broker / root))
        p = logdirs.partition(topic, part)
        table = read_table(logdirs, topic, partitions=[part], read_past_high_watermark=True)
        # NO_TIMESTAMP rows read as -1 ms (as in Spark's Kafka source): not a probe
        ts_col = [t for t in table.column("timestamp").cast("int64").to_pylist() if t >= 0]
        probes = sorted({t // 1000 for t in ts_col[::max(len(ts_col) // 40, 1)]} | {0})
        for ts in probes:
            assert logdirs.offset_for_timestamp(p, ts) == brute_force(table, ts), (root, ts)


@pytest.mark.parametrize("timeindex", [True, False])
def test_window_has_records_is_brute_force(tmp_path, timeindex):
    """Whether offsets [start, end) hold a record with lo <= timestamp < hi (copy_topic's
    preflight), against the builder's own records over timestamps that go back, log
    append time batches and offset gaps: never undecided on a small log."""
    b, p = build_times(tmp_path / "logs", timeindex=timeindex)
    logdirs = LogDirs(str(b.roots[0]))
    part = logdirs.partition("times", 0)
    exp = p.expected_table()
    rows = [(o, t // 1000) for o, t in zip(exp.column("offset").to_pylist(),
                                           exp.column("timestamp").cast("int64").to_pylist())
            if o >= 3]                                   # the log start
    offsets = [o for o, _ in rows]
    stamps = sorted({t for _, t in rows})
    rng = random.Random(11)
    seen = set()
    for _ in range(400):
        lo = rng.choice(stamps) + rng.choice((-1, 0, 1))
        hi = None if rng.random() < 0.1 else lo + rng.choice((1, 2, 5, 30, 300))
        start = rng.choice(offsets[:len(offsets) // 2])
        end = rng.choice(offsets[len(offsets) // 2:]) + rng.choice((0, 1))
        want = any(start <= o < end and lo <= t and (hi is None or t < hi) for o, t in rows)
        got = window_has_records(logdirs, part, start, end, lo, hi)
        assert got is want, (start, end, lo, hi)
        seen.add(want)
    assert seen == {True, False}
    assert window_has_records(logdirs, part, 10, 10, 0, None) is False
    assert window_has_records(logdirs, part, 3, offsets[-1] + 1, stamps[-1] + 1, None) is False
    assert window_has_records(logdirs, part, 3, offsets[-1] + 1, 0, stamps[0]) is False

"""Helpers for the appender / journal / crash tests (no tests here).

Batches are built by kafka-python's ``DefaultRecordBatchBuilder`` and read back by
kafka-python's and aiokafka's ``DefaultRecordBatch`` (CRC checked) — implementations
independent of this package — so they are oracles for what the appender writes.
"""
from __future__ import annotations

from pathlib import Path
import os
import struct
from dataclasses import dataclass

import numpy as np

from spark_kafkalog.log.write import (
    BATCH_TABLE_DTYPE,
    AppendConfig,
    StagingWriter,
    TopicSpec,
    commit_write,
)
from spark_kafkalog.log.files.index import build_indexes

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@dataclass(frozen=True)
class R:
    key: bytes | None
    value: bytes | None
    ts: int
    headers: tuple = ()


def kp_encode(records: list[R], *, codec: str = "none", per_batch: int = 50,
              offsets: list[int] | None = None) -> tuple[bytes, np.ndarray]:
    """Records -> v2 batches (kafka-python's builder, offsets from 0 in each batch) and
    the staging batch table describing them. ``offsets``: the offset each record keeps
    (an offsets=preserve write): the batches carry those offset deltas and the table
    their base offsets."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    out = bytearray()
    rows = []
    for i in range(0, len(records), per_batch):
        chunk = records[i:i + per_batch]
        offs = list(range(len(chunk))) if offsets is None else offsets[i:i + per_batch]
        b = DefaultRecordBatchBuilder(magic=2, compression_type=CODEC_IDS[codec],
                                      is_transactional=False, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1,
                                      batch_size=1 << 30)
        for o, r in zip(offs, chunk):
            b.append(o - offs[0], timestamp=r.ts, key=r.key, value=r.value,
                     headers=list(r.headers))
        data = bytes(b.build())
        rows.append((len(out), len(data), offs[-1] - offs[0], max(r.ts for r in chunk),
                     len(chunk), 0 if offsets is None else offs[0]))
        out += data
    return bytes(out), np.array(rows, dtype=BATCH_TABLE_DTYPE)


def stage(fs, root, write_id, parts: dict, *, topic="t", codec="none", per_batch=50,
          label="task", split=False):
    """Stage ``{partition: [R, ...]}`` (one section per partition) -> StagedFile;
    ``split``: one staging file per partition (the Spark writer's way)."""
    w = StagingWriter(fs, root, write_id, label, per_partition_files=split)
    for p, recs in parts.items():
        if recs:
            data, table = kp_encode(recs, codec=codec, per_batch=per_batch)
            w.add(topic, p, data, table)
    return w.finish()


def write(fs, root, write_id, parts: dict, *, topic="t", partitions=1, codec="none",
          per_batch=50, mode="append", config=None, fault=None, tasks=1, split=False):
    """Stage ``parts`` split over ``tasks`` staging files and commit them."""
    staged = []
    for k in range(tasks):
        sub = {p: recs[k::tasks] for p, recs in parts.items()}
        staged.append(stage(fs, root, write_id, sub, topic=topic, codec=codec,
                            per_batch=per_batch, label=f"t{k}", split=split))
    return commit_write(fs, root, write_id, staged,
                        [TopicSpec(topic, partitions_if_new=partitions)], mode=mode,
                        config=config or AppendConfig(), fault=fault)


def segments(directory) -> list[int]:
    return sorted(int(n[:-4]) for n in os.listdir(directory)
                  if n.endswith(".log") and len(n) == 24)


def read_kp(directory, stop_at: int | None = None, *, gaps: bool = False,
            ts_type: bool = False) -> list[tuple]:
    """(offset, key, value, timestamp, headers) of every record of a partition directory,
    decoded by kafka-python with CRCs checked; asserts each batch's base offset is the
    segment's next offset (contiguous) and that each segment's first batch starts at the
    segment's base offset. With ``stop_at``, reading ends at the first batch at or past
    that offset (what an offset-bounded reader does: bytes past it are never parsed).
    ``gaps`` (offsets kept by an offsets=preserve write): a batch's base offset need only
    exceed the previous batch's last offset, and a segment's first batch start at or
    past its base offset. ``ts_type``: each tuple also has the timestamp type."""
    from kafka.record.default_records import DefaultRecordBatch

    out = []
    expect = None
    for base in segments(directory):
        data = Path(os.path.join(directory, f"{base:020d}.log")).read_bytes()
        pos = 0
        first = True
        if stop_at is not None and base >= stop_at:
            break
        while pos < len(data):
            off, length = struct.unpack_from(">qi", data, pos)
            if stop_at is not None and off >= stop_at:
                break
            chunk = data[pos:pos + 12 + length]
            assert len(chunk) == 12 + length, f"torn batch in {base} at {pos}"
            batch = DefaultRecordBatch(bytearray(chunk))
            assert batch.validate_crc(), f"bad CRC in segment {base} at {pos}"
            if first:
                assert off == base or (gaps and off > base), \
                    f"segment {base} starts with offset {off}"
                first = False
            if expect is not None:
                assert off == expect or (gaps and off > expect), \
                    f"offset gap: {off} after {expect}"
            for r in batch:
                out.append((r.offset, r.key, r.value, r.timestamp,
                            tuple((k, v) for k, v in r.headers))
                           + ((r.timestamp_type,) if ts_type else ()))
            expect = off + batch.last_offset_delta + 1
            pos += 12 + length
    return out


def read_aio(directory) -> list[tuple]:
    """The same through aiokafka's decoder (CRC checked)."""
    from aiokafka.record.default_records import DefaultRecordBatch

    out = []
    for base in segments(directory):
        data = Path(os.path.join(directory, f"{base:020d}.log")).read_bytes()
        pos = 0
        while pos < len(data):
            _, length = struct.unpack_from(">qi", data, pos)
            batch = DefaultRecordBatch(bytearray(data[pos:pos + 12 + length]))
            assert batch.validate_crc()
            for r in batch:
                out.append((r.offset, r.key, r.value, r.timestamp,
                            tuple((k, v) for k, v in r.headers)))
            pos += 12 + length
    return out


def expected_segment_indexes(log_path: str, interval: int) -> tuple[bytes, bytes]:
    """What Kafka's LogSegment.recover writes for this segment, computed from a plain
    header walk of the file (not through the appender)."""
    data = Path(log_path).read_bytes()
    base = int(os.path.basename(log_path)[:-4])
    pos = 0
    positions, lasts, max_ts = [], [], []
    while pos < len(data):
        off, length = struct.unpack_from(">qi", data, pos)
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        (ts,) = struct.unpack_from(">q", data, pos + 35)
        positions.append(pos)
        lasts.append(off + delta)
        max_ts.append(ts)
        pos += 12 + length
    return build_indexes(base, interval, positions, lasts, max_ts)


def assert_indexes_like_broker(directory, interval):
    for base in segments(directory):
        log = os.path.join(directory, f"{base:020d}.log")
        idx, tidx = expected_segment_indexes(log, interval)
        got_idx = Path(log[:-4] + ".index").read_bytes()
        got_tidx = Path(log[:-4] + ".timeindex").read_bytes()
        assert got_idx == idx, f"offset index of segment {base} differs from a broker's"
        assert got_tidx == tidx, f"time index of segment {base} differs from a broker's"

"""Both tiers of one partition built by hand (no broker), for the tiered tests and the
README's tiered example: a log's first three segments moved to a remote root in
LocalTieredStorage's layout (or a path template) and listed in ``__remote_log_metadata``,
the rest left local."""
from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa

from spark_kafkalog.format.remote_log_metadata import TOPIC as RLM
from spark_kafkalog.log.write.table import write_table
from tests.format import remote_log_metadata_builders as b

from .logbuilder import LogDirBuilder, rec, sample_records, segment_name

TOPIC = "orders"
TOPIC_ID = b.TOPIC_ID
SEG_IDS = ["AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBA", "CCCCCCCCCCCCCCCCCCCCCA"]
SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")


def build(tmp_path: Path, *, more_local: int = 0):
    """Segments [0, 10) [10, 17) [17, ..) remote, the rest local; producer 7's
    transaction starts in the last remote segment and is aborted locally; producer 8's
    is committed across the boundary too. ``more_local`` more local segments of 3
    records each at the end."""
    full = tmp_path / "full"
    lb = LogDirBuilder(full)
    p = lb.partition(TOPIC, 0)
    p.log_start_offset = 0
    p.append(sample_records(10, b"a"))
    p.roll()
    p.append(sample_records(4, b"b"))
    p.append(sample_records(3, b"c"))
    p.roll()
    t7 = p.begin_txn(7)
    t8 = p.begin_txn(8)
    p.append([rec(b"k7", b"aborted-1")], txn=t7)
    p.append([rec(b"k8", b"committed-1")], txn=t8)
    p.append(sample_records(2, b"d"))
    p.roll()                                   # the local tier starts here
    p.append([rec(b"k7", b"aborted-2")], txn=t7)
    p.end_txn(t7, commit=False)
    p.append([rec(b"k8", b"committed-2")], txn=t8)
    p.end_txn(t8, commit=True)
    p.roll()
    p.append(sample_records(5, b"e"))
    for i in range(more_local):
        p.roll()
        p.append(sample_records(3, b"f%d" % i))
    p.high_watermark = p.log_end_offset
    lb.write()
    bases = [base for base, _ in p.segments]
    return p, full, bases


def tier(tmp_path, p, full, bases, *, template=None, listed=(0, 1, 2), data=None,
         remote=None):
    """Copy ``full`` to a log dir (``data``, default ``tmp_path/data``) without the first
    three segments, those in a remote root (``remote``, default ``tmp_path/remote``), and
    their metadata (copy started, then finished) in the log dir."""
    data = Path(data) if data else tmp_path / "data"
    remote = Path(remote) if remote else tmp_path / "remote"
    shutil.copytree(full, data)
    src = full / f"{TOPIC}-0"
    values = []
    for i in range(3):
        start, end = bases[i], bases[i + 1] - 1
        size = (src / segment_name(start, ".log")).stat().st_size
        has_txn = (src / segment_name(start, ".txnindex")).exists()
        for suffix in SUFFIXES:
            f = src / segment_name(start, suffix)
            (data / f"{TOPIC}-0" / f.name).unlink(missing_ok=True)
            if not f.exists():
                continue
            name = (template or "{topic}-{partition}-{topic_id}/{start_offset}-{segment_id}"
                    "{suffix}").format(topic=TOPIC, partition=0, topic_id=TOPIC_ID,
                                       segment_id=SEG_IDS[i], start_offset=f"{start:020d}",
                                       suffix=suffix)
            (remote / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, remote / name)
        if i in listed:
            kw = dict(topic=TOPIC, topic_id=TOPIC_ID, partition=0, segment=SEG_IDS[i])
            values.append(b.segment(start=start, end=end, size=size, txn_empty=not has_txn,
                                    **kw))
            values.append(b.update(state=1, **kw))
    write_table(str(data), RLM, pa.table({"value": pa.array(values, pa.binary())}),
                allow_internal_topic=True)
    return str(data), str(remote)

"""Compaction of a log holding legacy (v0/v1) message sets is refused, naming the
partition and the magic, and nothing is written: Kafka's cleaner keeps such messages'
magic and rewrites compressed wrappers, which this cleaner does not do."""
from __future__ import annotations

import pytest

from spark_kafkalog.errors import UnsupportedFormatError
from spark_kafkalog.log.maintain import check_compactable, compact_topic
from spark_kafkalog.log.files import journal as jr
from tests.log.logbuilder import LogDirBuilder, rec
from tests.log.test_compact import T0
from tests.log.test_crash import FS


def _snapshot(root):
    return {f: f.read_bytes() for f in root.rglob("*") if f.is_file()}


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("where", ["first", "after-v2"])
def test_legacy_log_is_refused_and_left_as_it_was(tmp_path, magic, where):
    b = LogDirBuilder(tmp_path)
    b.partition("c", 0).append([rec(b"k", b"v", ts=T0)])
    p = b.partition("c", 1)
    if where == "after-v2":             # a downgraded message.format.version
        p.append([rec(b"k", b"v2", ts=T0)])
    p.append_legacy(magic, [rec(b"k", b"v%d" % i, ts=T0) for i in range(3)],
                    compression="gzip")
    p.roll()
    p.append_legacy(magic, [rec(b"k", b"last", ts=T0)])
    b.write()
    before = _snapshot(tmp_path)
    msg = (rf"topic 'c' partition 1: compaction of legacy \(magic {magic}\) message sets "
           r"is not supported .* copy the topic to v2 batches first")
    if where == "first":
        with pytest.raises(UnsupportedFormatError, match=msg):
            check_compactable(str(tmp_path), "c")
        check_compactable(str(tmp_path), "c", partitions=[0])     # v2 only: fine
    with pytest.raises(UnsupportedFormatError, match=msg) as info:
        compact_topic(str(tmp_path), "c", now_ms=T0)
    assert info.value.path.endswith("c-1/00000000000000000000.log")
    assert jr.load(FS, str(tmp_path), "c").pending is None
    after = _snapshot(tmp_path)
    assert {f: d for f, d in after.items() if "journal" not in f.name
            and not f.name.startswith(".")} == \
        {f: d for f, d in before.items() if "journal" not in f.name
         and not f.name.startswith(".")}

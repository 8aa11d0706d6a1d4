"""Hostile bytes: damaged or garbage segments and index files never hang, crash or raise
anything but our own errors; skip and stop never invent records."""
import shutil
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_kafkalog.errors import KafkaLogError
from spark_kafkalog.log import LogDirs, TornTailWarning, inspect_partition, read_table

from .logbuilder import LogDirBuilder, rec


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    root = tmp_path_factory.mktemp("pristine")
    b = LogDirBuilder(root / "logs")
    p = b.partition("t", 0, index_interval_bytes=150)
    for i in range(12):
        p.append([rec(b"k%d" % j, b"v%d-%d" % (i, j) * (j + 1)) for j in range(i % 4 + 1)],
                 compression=["none", "gzip", "lz4"][i % 3])
        if i == 5:
            p.roll()
    t = p.begin_txn(9)
    p.append([rec(None, b"txn")], txn=t)
    p.end_txn(t, commit=False)
    p.append_legacy(1, [rec(None, b"l1"), rec(None, b"l2")], compression="gzip")
    b.write()
    good = {(r.offset, r.key, r.value) for r in p.rows}
    return root / "logs", p, good


SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def _read_all_policies(root, good):
    for policy in ("fail", "skip", "stop"):
        for level in ("read_uncommitted", "read_committed"):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", TornTailWarning)
                    # skip and stop read what is there (records gone with the damage
                    # are data loss: fail only says so)
                    t = read_table(str(root), "t", on_corruption=policy, isolation_level=level,
                                   window_bytes=200, fail_on_data_loss=policy == "fail")
            except KafkaLogError:
                if policy == "fail":
                    continue
                raise
            # nothing invented: every record is one of the log's (its offset may differ:
            # a batch's base offset is not covered by its CRC, in any magic)
            rows = set(zip(t.column("key").to_pylist(), t.column("value").to_pylist()))
            assert rows <= {(k, v) for _, k, v in good}
            offsets = t.column("offset").to_pylist()
            assert offsets == sorted(set(offsets))
    logdirs = LogDirs(str(root))
    info = inspect_partition(logdirs, logdirs.partition("t", 0))
    return info


@SETTINGS
@given(data=st.data())
def test_mutated_segments(pristine, tmp_path, data):
    src, p, good = pristine
    root = tmp_path / "case"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(src, root)
    seg_files = sorted((root / "t-0").glob("*.log"))
    target = data.draw(st.sampled_from(seg_files))
    raw = bytearray(target.read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        action = data.draw(st.sampled_from(["flip", "truncate", "insert", "zero"]))
        if not raw:
            break
        pos = data.draw(st.integers(0, len(raw) - 1))
        if action == "flip":
            raw[pos] ^= data.draw(st.integers(1, 255))
        elif action == "truncate":
            del raw[pos:]
        elif action == "insert":
            raw[pos:pos] = data.draw(st.binary(min_size=1, max_size=80))
        else:
            n = data.draw(st.integers(1, 64))
            raw[pos:pos + n] = b"\0" * len(raw[pos:pos + n])
    target.write_bytes(bytes(raw))
    info = _read_all_policies(root, good)
    # whatever the damage, inspection accounts for every byte it did not accept
    for seg in info.segments:
        if seg.scanned and seg.valid_bytes is not None and seg.valid_bytes < seg.size:
            assert seg.problems, (seg.path, seg.valid_bytes, seg.size)


@SETTINGS
@given(blob=st.binary(max_size=3000), index=st.binary(max_size=200),
       timeindex=st.binary(max_size=200), txnindex=st.binary(max_size=120))
def test_garbage_files(tmp_path, blob, index, timeindex, txnindex):
    root = tmp_path / "g"
    d = root / "t-0"
    if root.exists():
        shutil.rmtree(root)
    d.mkdir(parents=True)
    (d / "00000000000000000000.log").write_bytes(blob)
    (d / "00000000000000000000.index").write_bytes(index)
    (d / "00000000000000000000.timeindex").write_bytes(timeindex)
    (d / "00000000000000000000.txnindex").write_bytes(txnindex)
    (root / "replication-offset-checkpoint").write_text("0\n1\nt 0 5\n")
    _read_all_policies(root, set())

"""Several writer processes appending to one topic at once: the writer lock serializes
their commits; every record lands once, each commit's records are contiguous, offsets
have no gap, indexes and checkpoints are a broker's."""
from __future__ import annotations

import io
import os
import traceback

import pyarrow.fs as pafs

from spark_kafkalog.cli import main
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.write import AppendConfig
from tests.log.test_appender_util import R, assert_indexes_like_broker, read_kp, write

FS = pafs.LocalFileSystem()
WRITERS, COMMITS, PER = 4, 6, 25


def recs(w, k, p):
    return [R(b"w%d" % w, b"%d/%d/%d/%d" % (w, k, p, i), 1000 * k + i) for i in range(PER)]


def test_concurrent_writers_are_serialized(tmp_path):
    root = str(tmp_path)
    cfg = AppendConfig(segment_bytes=9000, index_interval_bytes=500, lock_timeout=120)
    pids = []
    for w in range(WRITERS):
        pid = os.fork()
        if pid == 0:                                   # a writer process
            code = 0
            try:
                for k in range(COMMITS):
                    write(FS, root, f"batch:w{w}-{k}",
                          {p: recs(w, k, p) for p in (0, 1)}, partitions=2, config=cfg,
                          per_batch=7)
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        pids.append(pid)
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    st = jr.load(FS, root, "t")
    assert len(st.commits) == WRITERS * COMMITS and st.pending is None
    for p in (0, 1):
        d = f"{root}/t-{p}"
        got = read_kp(d)                                # asserts contiguous offsets, CRCs
        assert [r[0] for r in got] == list(range(WRITERS * COMMITS * PER))
        assert sorted(r[2] for r in got) == sorted(
            b"%d/%d/%d/%d" % (w, k, p, i) for w in range(WRITERS) for k in range(COMMITS)
            for i in range(PER))
        # each commit's records sit in the offset range its journal entry names
        for c in st.commits:
            w, k = c["write_id"][len("batch:w"):].split("-")
            lo, hi = c["partitions"][str(p)]["start"], c["partitions"][str(p)]["end"]
            assert hi - lo == PER
            assert {r[2].rsplit(b"/", 1)[0] for r in got[lo:hi]} == {
                b"%s/%s/%d" % (w.encode(), k.encode(), p)}
        assert_indexes_like_broker(d, 500)
    out = io.StringIO()
    assert main(["verify", "--strict", "--no-progress", root], stdout=out,
                stderr=io.StringIO()) == 0, out.getvalue()

#!/usr/bin/env python
"""The commit journal at steady state on a wide topic: what each commit loads and saves.

Records ``--commits`` (default 1,000) commits of ``--partitions`` (default 1,000) partition
ranges each into a journal (trimmed as the writer trims it), saves it, then times load +
one more commit + save (best of 3): the journal work every write's commit does.

    python bench/bench_journal.py [--commits 1000] [--partitions 1000]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    import pyarrow.fs as pafs

    from spark_kafkalog.log.files import journal as jr

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=1000)
    args = ap.parse_args(argv)
    fs = pafs.LocalFileSystem()

    def entry(i: int) -> dict:
        lo, hi = i * 10, i * 10 + 10
        return {"write_id": f"batch:{i}", "mode": "append", "committed_ms": i,
                "partitions": {str(p): {"start": lo, "end": hi, "segments": [[0, lo, hi]]}
                               for p in range(args.partitions)}}

    with tempfile.TemporaryDirectory(prefix="kafkalog-bench-journal-") as root:
        st = jr.JournalState(topic="t")
        for i in range(args.commits):
            st.record_commit(entry(i))
        jr.save(fs, root, st)
        size = os.path.getsize(jr.journal_path(root, "t"))
        times = []
        for k in range(3):
            t0 = time.perf_counter()
            st = jr.load(fs, root, "t")
            st.record_commit(entry(args.commits + k))
            jr.save(fs, root, st)
            times.append(time.perf_counter() - t0)
    print(f"{args.commits:,} commits x {args.partitions:,} partitions: {len(st.commits)} "
          f"kept, journal {size / 1e6:.1f} MB, load + commit + save {min(times) * 1e3:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

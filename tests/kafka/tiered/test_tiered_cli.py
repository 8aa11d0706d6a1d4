"""``kafkalog inspect/cat/verify --remote-storage`` over the broker's tiered topics: cat
prints what the Java consumer read from offset 0, inspect shows the remote tier, verify
passes on the broker's files and reports remote objects the metadata lists but the store lacks."""
from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

from spark_kafkalog.cli import main
from spark_kafkalog.log import LogDirs
from spark_kafkalog.log.read.reader import load_remote_metadata


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _text(data):
    return None if data is None else data.decode("utf-8")


def test_cat_reads_both_tiers(tiered):
    for isolation in ("read_uncommitted", "read_committed"):
        # kcat's -J envelope: key and payload as text (the test's records are UTF-8)
        code, out, err = cli("cat", tiered.logdir, "-t", "tiered-txn", "-J", "-e",
                             "--isolation-level", isolation, "--remote-storage", tiered.remote)
        assert code == 0, err
        rows = [json.loads(line) for line in out.splitlines()]
        got = [(r["partition"], r["offset"], r["key"], r["payload"]) for r in rows]
        want = [(r["partition"], r["offset"], _text(r["key"]), _text(r["value"]))
                for r in tiered.expected("tiered-txn", isolation)]
        assert got == want


def test_inspect_shows_the_remote_tier(tiered):
    code, out, _ = cli("inspect", tiered.logdir, "--topic", "tiered-zstd", "--json",
                       "--remote-storage", tiered.remote)
    assert code == 0
    for s in json.loads(out)["partitions"]:
        r = s["remote"]
        assert r["remote_segments"] > 1 and r["log_start_offset"] == s["log_start_offset"] == 0
        assert r["remote_end_offset"] >= r["local_log_start_offset"] > 0 and r["gap"] is None


def test_verify_passes_then_finds_missing_remote_objects(tiered, tmp_path):
    code, out, _ = cli("verify", tiered.logdir, "--remote-storage", tiered.remote,
                       "--topic", "tiered-gzip", "--topic", "tiered-txn")
    assert code == 0, out
    remote = tmp_path / "remote"
    shutil.copytree(tiered.remote, remote)
    segs = sorted((s for s in load_remote_metadata(LogDirs(tiered.logdir)).segments()
                   .to_pylist() if s["topic"] == "tiered-gzip" and s["partition"] == 1),
                  key=lambda s: s["start_offset"])
    gone = next(remote.glob(f"tiered-gzip-1-*/{segs[2]['start_offset']:020d}-*.timeindex"))
    gone.unlink()
    code, out, _ = cli("verify", tiered.logdir, "--remote-storage", remote,
                       "--topic", "tiered-gzip")
    assert code == 1
    assert f"tiered-gzip-1: remote: remote segment {segs[2]['segment_id']}" in out
    assert str(gone) in out
    for f in Path(gone.parent).glob(f"{segs[3]['start_offset']:020d}-*"):
        f.unlink()
    code, out, _ = cli("verify", tiered.logdir, "--remote-storage", remote, "--json",
                       "--topic", "tiered-gzip")
    kinds = [(f["kind"], f["partition"], f["offset"]) for f in json.loads(out)["findings"]]
    assert ("remote", 1, segs[3]["start_offset"]) in kinds

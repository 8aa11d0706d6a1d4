"""``kafkalog verify`` fails on data loss and audits a copy against a manifest;
``kafkalog cat`` fails on data loss (exit 1) unless told to print what is there."""
import io
import json
import os
import shutil

import pytest

from spark_kafkalog.cli import main
from tests.log.logbuilder import LogDirBuilder, rec
from tests.log.loss_shapes import LOSSES, NOT_LOSS, TOPIC


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("shape", sorted(LOSSES))
def test_verify_and_cat_fail_on_loss(tmp_path, shape):
    kind, start, end = LOSSES[shape](tmp_path)
    code, out, _ = run("verify", tmp_path, "--json")
    doc = json.loads(out)
    assert code == 1 and not doc["ok"]
    lost = [f for f in doc["findings"] if f["severity"] == "error" and (
        f["kind"] == "data_loss" or "data loss" in f["message"])]
    assert any(f"{start}..{end - 1}" in f["message"] for f in lost), lost
    code, out, err = run("cat", tmp_path, "-t", TOPIC, "-f", "%o\\n")
    assert code == 1 and "DataLoss" not in err and f"offsets {start}..{end - 1}" in err
    assert "--ignore-data-loss" in err
    code, out, err = run("cat", tmp_path, "-t", TOPIC, "-f", "%o\\n", "--ignore-data-loss")
    offsets = [int(x) for x in out.split()]
    assert code == 0 and not any(start <= o < end for o in offsets)
    assert offsets or kind == "log_start"        # a log start past the end: nothing to read


@pytest.mark.parametrize("shape", sorted(NOT_LOSS))
def test_verify_passes_what_a_broker_leaves(tmp_path, shape):
    NOT_LOSS[shape](tmp_path)
    code, out, _ = run("verify", tmp_path, "--json")
    assert code == 0, out
    assert run("cat", tmp_path, "-t", TOPIC)[0] == 0


def _orig(root):
    b = LogDirBuilder(root)
    for q in range(2):
        p = b.partition("orders", q, index_interval_bytes=64)
        for s in range(3):
            if s:
                p.roll()
            for i in range(10):
                p.append([rec(b"k%d" % i, b"v%d-%d-%d" % (q, s, i))])
        p.high_watermark = 30
    b.write()


def test_manifest_proves_a_copy_whole_or_names_what_it_lacks(tmp_path):
    orig, manifest = tmp_path / "orig", tmp_path / "m.json"
    _orig(orig)
    code, out, _ = run("verify", orig, "--manifest", manifest)
    assert code == 0
    doc = json.loads(manifest.read_text())
    seg = doc["files"]["orders-0/00000000000000000010.log"]
    assert (seg["first_offset"], seg["last_offset"], seg["records"], seg["kind"]) == \
        (10, 19, 10, "segment") and len(seg["sha256"]) == 64
    assert doc["files"]["orders-0/00000000000000000010.index"]["kind"] == "index"
    assert doc["partitions"]["orders-1"]["checkpoints"]["replication-offset-checkpoint"] == 30
    whole = tmp_path / "whole"
    shutil.copytree(orig, whole)
    code, out, _ = run("verify", whole, "--against", manifest, "--json")
    assert code == 0 and not json.loads(out)["findings"]
    bad = tmp_path / "bad"
    shutil.copytree(orig, bad)
    (bad / "orders-0" / "00000000000000000010.log").unlink()
    os.truncate(bad / "orders-1" / "00000000000000000020.log", 100)
    with open(bad / "orders-1" / "00000000000000000000.log", "r+b") as f:
        f.seek(80)
        f.write(b"X")
    (bad / "orders-0" / "notes.txt").write_text("extra\n")
    code, out, _ = run("verify", bad, "--against", manifest, "--json")
    assert code == 1
    got = sorted((f["path"][len(str(bad)) + 1:], f["message"].split(":")[0])
                 for f in json.loads(out)["findings"] if f["kind"] == "manifest")
    assert got == [("orders-0/00000000000000000010.log", "missing"),
                   ("orders-0/notes.txt", "extra"),
                   ("orders-1/00000000000000000000.log", "altered"),
                   ("orders-1/00000000000000000020.log", "truncated")]
    # and a checkpoint entry that differs is named
    (bad / "replication-offset-checkpoint").write_text("0\n2\norders 0 30\norders 1 21\n")
    code, out, _ = run("verify", bad, "--against", manifest, "--json")
    [ck] = [f for f in json.loads(out)["findings"]
            if f["kind"] == "manifest" and f["message"].startswith("checkpoint")]
    assert "holds 21 for orders-1, the manifest 30" in ck["message"]


def test_a_job_writes_a_manifest_of_its_output(tmp_path):
    """The retention job (as copy_topic, import_files and compact) writes a manifest of
    the log dir it changed; the log dir passes against it and a copy missing a file
    does not."""
    from spark_kafkalog.jobs import retention

    root, manifest, summary = tmp_path / "logs", tmp_path / "m.json", tmp_path / "s.json"
    _orig(root)
    # file.delete.delay.ms 0: the manifest is what this test is about, not the wait
    # (tests/test_job_retention.py holds that); the default made it sleep 60 s
    assert retention.main(["--path", str(root), "--no-progress", "--manifest",
                           str(manifest), "--summary-json", str(summary),
                           "--file-delete-delay-ms", "0"]) == 0
    assert json.loads(summary.read_text())["manifest"]["path"] == str(manifest)
    assert run("verify", root, "--against", manifest)[0] == 0
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    (copy / "orders-1" / "00000000000000000020.timeindex").unlink()
    code, out, _ = run("verify", copy, "--against", manifest)
    assert code == 1 and "missing: orders-1/00000000000000000020.timeindex" in out

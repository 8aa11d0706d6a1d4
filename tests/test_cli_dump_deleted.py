"""``kafkalog dump`` on segment files renamed for delayed deletion, under both names
(:mod:`spark_kafkalog.log.io.deleted`): retention's ``<name>.deleted`` (Kafka's) and
compaction's ``<name>.<token>.deleted``. Each dumps exactly as the file did under its
own name, its index checked against the ``.log`` renamed with it."""
from __future__ import annotations

import os
import shutil

from spark_kafkalog.log.io import split_deleted
from spark_kafkalog.log.maintain import CompactSettings, compact_topic
from tests.log.test_compact import T0, build
from tests.test_cli import run


def body(path) -> list[str]:
    code, out, err = run("dump", "--records", path)
    assert code == 0 and err == "", (path, err)
    lines = out.splitlines()
    assert lines[0].startswith("Dumping ")
    return lines[1:]


def test_split_deleted_names():
    seg = "00000000000000000042.log"
    assert split_deleted(seg) == (seg, "")
    assert split_deleted(seg + ".deleted") == (seg, ".deleted")
    assert split_deleted(seg + ".1a2b3c4d.deleted") == (seg, ".1a2b3c4d.deleted")
    assert split_deleted("00000000000000000042.timeindex.ff.deleted") == \
        ("00000000000000000042.timeindex", ".ff.deleted")
    # only a segment file takes a token: anything else just loses Kafka's suffix
    assert split_deleted("leader-epoch-checkpoint.deleted") == \
        ("leader-epoch-checkpoint", ".deleted")
    assert split_deleted("foo.bar.deleted") == ("foo.bar", ".deleted")


def test_dump_compactions_and_retentions_renamed_files(tmp_path):
    root = tmp_path / "log"
    build(root, 5)
    before = tmp_path / "before"
    shutil.copytree(root / "c-0", before)
    compact_topic(str(root), "c", CompactSettings(), now_ms=T0)
    pdir = root / "c-0"
    renamed = sorted(n for n in os.listdir(pdir) if n.endswith(".deleted"))
    kinds = {split_deleted(n)[0].rsplit(".", 1)[1] for n in renamed}
    assert {"log", "index", "timeindex"} <= kinds, renamed
    assert all(split_deleted(n)[1] != ".deleted" for n in renamed)   # the token form
    # retention's (Kafka's) form too: rename one original by hand
    kafka_form = tmp_path / "kafka"
    kafka_form.mkdir()
    for n in renamed:
        original = split_deleted(n)[0]
        assert (before / original).exists(), n
        want = body(before / original)
        assert want and body(pdir / n) == want, n
        shutil.copy(before / original, kafka_form / (original + ".deleted"))
    for n in sorted(os.listdir(kafka_form)):
        assert body(kafka_form / n) == body(before / split_deleted(n)[0]), n


def test_index_sanity_check_prints_the_path_as_given(tmp_path, monkeypatch):
    """Kafka's DumpLogSegments prints ``<file as given> passed sanity check.``: a
    relative path stays relative (we printed it made absolute)."""
    from spark_kafkalog.jobs.make_sample_log import make_sample_log

    make_sample_log(tmp_path / "logs", records=500, partitions=1, seed=2)
    monkeypatch.chdir(tmp_path)
    rel = os.path.join("logs", "events-0", "00000000000000000000.index")
    code, out, err = run("dump", "--index-sanity-check", "--files", rel)
    assert code == 0 and err == "", err
    assert out.splitlines() == [f"Dumping {rel}", f"{rel} passed sanity check."]

"""``kafkalog dump`` against Kafka 4.4's own ``kafka-dump-log.sh`` (DumpLogSegments from the
4.4.0 jars): the same stdout, line for line, for every file kind of the broker-written
topics (segments of every codec, transactions, a compacted and a LogAppendTime topic,
offset and time indexes, transaction indexes, producer snapshots) and of the logs we write,
under each of Kafka's flags (shallow, --deep-iteration, --print-data-log,
--skip-record-metadata, --index-sanity-check, --verify-index-only, --max-bytes) and the
__consumer_offsets / __transaction_state decoders."""
from __future__ import annotations

import contextlib
import difflib
import io

import pytest

from spark_kafkalog.cli import main as kafkalog
from tests.kafka.broker import KAFKA44, dump_log_segments, jars_present

TOPICS = ("java-none", "java-gzip", "java-snappy", "java-lz4", "java-zstd", "java-txn",
          "java-compact", "java-logappend", "rdk-lz4", "rdk-txn")
MODES = ([], ["--deep-iteration"], ["--print-data-log"],
         ["--print-data-log", "--skip-record-metadata"], ["--deep-iteration",
         "--skip-record-metadata"], ["--index-sanity-check"], ["--verify-index-only"],
         ["--max-bytes", "700", "--deep-iteration"])
KINDS = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")


def kafka_dump(files, *flags) -> str:
    if not jars_present(KAFKA44.jars):
        pytest.fail(f"Kafka 4.4's jars are not in {KAFKA44.jars}: run `make kafka-jars`",
                    pytrace=False)
    return dump_log_segments(files, *flags, kafka=KAFKA44)


def our_dump(files, *flags) -> str:
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", newline="")
    err = io.StringIO()
    code = kafkalog(["dump", "--files", ",".join(map(str, files)), *flags], stdout=out,
                    stderr=err)
    out.flush()
    assert code in (0, 1), err.getvalue()
    return raw.getvalue().decode("utf-8")


def assert_same(files, *flags):
    theirs = kafka_dump(files, *flags)
    ours = our_dump(files, *flags)
    if ours != theirs:
        diff = "\n".join(list(difflib.unified_diff(theirs.splitlines(), ours.splitlines(),
                                                   "kafka 4.4", "kafkalog", n=1,
                                                   lineterm=""))[:60])
        pytest.fail(f"dump {' '.join(flags)} differs:\n{diff}", pytrace=False)
    return theirs


def files_of(part, kinds=KINDS):
    """A partition's files, its active segment's last: the broker may still append to
    the active segment of an internal topic, so only rolled segments are compared."""
    logs = sorted(part.glob("*.log"))
    rolled = {f.stem for f in logs[:-1]}
    return sorted(f for f in part.iterdir() if f.suffix in kinds and f.stem in rolled)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: " ".join(m) or "shallow")
def test_broker_written_files(kafka_broker, broker_topics, mode):
    files = [f for t in TOPICS for q in (0, 1) if (kafka_broker.logdir / f"{t}-{q}").is_dir()
             for f in files_of(kafka_broker.logdir / f"{t}-{q}")]
    assert {f.suffix for f in files} >= {".log", ".index", ".timeindex", ".snapshot"}
    text = assert_same(files, *mode)
    assert text.count("Dumping ") == len(files)


@pytest.mark.parametrize("topic,flag", [("__consumer_offsets", "--offsets-decoder"),
                                        ("__transaction_state", "--transaction-log-decoder")])
def test_decoders(kafka_broker, broker_topics, kafka_tool, topic, flag):
    if topic == "__consumer_offsets":      # a consumer group (KIP-848) commits offsets
        kafka_tool.group("dump-parity", "consumer", ["java-none", "java-txn"])
    parts = sorted(kafka_broker.logdir.glob(f"{topic}-*"))
    files = [f for p in parts for f in sorted(p.glob("*.log")) if f.stat().st_size > 0]
    assert files, f"no {topic} segment holds records"
    # the coordinators may append meanwhile: compare a copy
    import shutil
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        copies = []
        for f in files:
            dst = f"{tmp}/{f.parent.name}"
            shutil.os.makedirs(dst, exist_ok=True)
            copies.append(shutil.copy(f, dst))
        assert_same(copies, flag)


def test_cluster_metadata_log(kafka_broker, broker_topics, tmp_path):
    """The broker's KRaft log and snapshots (control records: LeaderChange, snapshot
    header and footer, KRaft version and voters), copied so that the controller's appends
    meanwhile do not change what both tools read."""
    import shutil
    src = kafka_broker.logdir / "__cluster_metadata-0"
    dst = tmp_path / "__cluster_metadata-0"
    dst.mkdir()
    files = [shutil.copy(f, dst) for f in sorted(src.iterdir())
             if f.suffix in (".log", ".checkpoint") and f.stat().st_size > 0]
    assert files, "the broker wrote no __cluster_metadata segment"
    for flags in ([], ["--deep-iteration"], ["--print-data-log"]):
        assert_same(files, *flags)

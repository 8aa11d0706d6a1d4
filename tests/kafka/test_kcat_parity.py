"""``kafkalog cat`` against kcat itself (Debian's package, librdkafka) consuming the same
records from the tier's broker: byte-identical stdout for kcat's format strings, escapes,
delimiters, -Z, -s pack formats, offsets (N, -N, s@TS, e@TS), -c, and -J, over the
broker-written topics (every codec, headers, null keys and values, transactions with
aborts, a compacted topic, LogAppendTime). kcat reads through the broker; we read the
broker's log dir. ``make kcat`` installs kcat; without it every test here fails."""
from __future__ import annotations

import io
import shutil
import subprocess

import pytest

from spark_kafkalog.cli import main
from tests.kafka.topics import BASE_TS

TOPICS = ("java-none", "java-gzip", "java-snappy", "java-lz4", "java-zstd", "java-txn",
          "java-compact", "java-logappend", "rdk-none", "rdk-gzip", "rdk-snappy", "rdk-lz4",
          "rdk-zstd", "rdk-txn")
FORMATS = (
    ["-f", "%o %k %s\\n"],
    ["-f", "%t [%p] @%o: %k=%s\\n"],
    ["-f", "%K %S %T\\n"],
    ["-f", "%h|%s\\n"],
    ["-f", "%R%s"],
    ["-f", "%o\\t%T\\t%k\\r\\n"],
    ["-f", "\\x41%%\\x3a%s\\n\\101\\7"],
    [],                                         # kcat's default: %s and -D (\n)
    ["-K", ":"],
    ["-Z", "-f", "%k|%s|%h\\n"],
    ["-D", "\\x1e"],
    ["-K", "\\t", "-D", "|\\n"],
    ["-s", "key=BBs", "-f", "%k %s\\n"],
    ["-s", "value=bhs", "-f", "%s\\n"],
    ["-f", "%o:%S\\n", "-X", "isolation.level=read_uncommitted"],
)
POSITIONS = (["-o", "3"], ["-o", "-4"], ["-o", "end"], ["-c", "5"], ["-o", "1", "-c", "3"],
             ["-o", f"s@{BASE_TS + 40}"], ["-o", f"e@{BASE_TS + 60}"])


def kcat(broker, topic: str, partition: int, args: list[str]) -> bytes:
    exe = shutil.which("kcat")
    if exe is None:
        pytest.fail("kcat is not installed: run `make kcat` (Debian's kcat package)",
                    pytrace=False)
    cmd = [exe, "-C", "-b", broker.bootstrap, "-t", topic, "-p", str(partition), "-e", "-q",
           *args]
    if "-o" not in args:
        cmd += ["-o", "beginning"]
    proc = subprocess.run(cmd, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout


def kafkalog(broker, topic: str, partition: int, args: list[str]) -> bytes:
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", newline="")
    err = io.StringIO()
    code = main(["cat", str(broker.logdir), "-C", "-t", topic, "-p", str(partition), "-e",
                 "-q", *args], stdout=out, stderr=err)
    out.flush()
    assert code == 0, err.getvalue()
    return raw.getvalue()


def same(broker, topic, partition, args):
    ours = kafkalog(broker, topic, partition, args)
    theirs = kcat(broker, topic, partition, args)
    assert ours == theirs, (topic, partition, args, ours[:400], theirs[:400])
    return theirs


@pytest.mark.parametrize("args", FORMATS, ids=lambda a: " ".join(a) or "default")
def test_formats_are_byte_identical(kafka_broker, broker_topics, args):
    printed = 0
    for topic in ("java-gzip", "rdk-zstd", "java-txn", "java-logappend", "rdk-none"):
        for partition in (0, 1):
            printed += len(same(kafka_broker, topic, partition, args))
    assert printed > 0


@pytest.mark.parametrize("topic", TOPICS)
def test_json_is_byte_identical(kafka_broker, broker_topics, topic):
    for partition in range(2 if topic != "java-compact" else 1):
        out = same(kafka_broker, topic, partition, ["-J"])
        assert out.count(b"\n") > 0
        same(kafka_broker, topic, partition,
             ["-J", "-X", "isolation.level=read_uncommitted", "-D", "\\n\\n"])


@pytest.mark.parametrize("args", POSITIONS, ids=lambda a: " ".join(a))
def test_offsets_and_counts(kafka_broker, broker_topics, args):
    for topic in ("java-snappy", "rdk-txn"):
        same(kafka_broker, topic, 1, args + ["-f", "%o %T %k\\n"])

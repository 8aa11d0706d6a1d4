"""``kafkalog dump`` against Kafka 4.4's own ``kafka-dump-log.sh`` (DumpLogSegments from the
4.4.0 jars): the same stdout, line for line, for every file kind of the broker-written
topics (segments of every codec, transactions, a compacted and a LogAppendTime topic,
offset and time indexes, transaction indexes, producer snapshots) and of the logs we write,
under each of Kafka's flags (shallow, --deep-iteration, --print-data-log,
--skip-record-metadata, --index-sanity-check, --verify-index-only, --max-bytes,
--max-message-size) and the __consumer_offsets / __transaction_state decoders."""
from __future__ import annotations

import contextlib
import difflib
import io
import re
import subprocess

import pyarrow as pa
import pytest

from spark_kafkalog.cli import main as kafkalog
from tests.kafka.broker import CLIENT_JVM, JAVA, KAFKA44, classpath, jars_present

TOPICS = ("java-none", "java-gzip", "java-snappy", "java-lz4", "java-zstd", "java-txn",
          "java-compact", "java-logappend", "rdk-lz4", "rdk-txn")
MODES = ([], ["--deep-iteration"], ["--print-data-log"],
         ["--print-data-log", "--skip-record-metadata"], ["--deep-iteration",
         "--skip-record-metadata"], ["--index-sanity-check"], ["--verify-index-only"],
         ["--max-bytes", "700", "--deep-iteration"],
         # smaller than some batches of both the broker's and our logs: Kafka's tool reads
         # segments whatever their batches' size, and dies (NoSuchElementException) at an
         # offset index entry whose batch is larger (the broker's indexes are empty, ours
         # are not); see assert_same
         ["--max-message-size", "300", "--deep-iteration"])
KINDS = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
#: how Kafka's tool dies at an index entry whose batch is over --max-message-size
OVERSIZE_DEATH = ("java.util.NoSuchElementException", "DumpLogSegments.dumpIndex")


def kafka_run(files, *flags) -> tuple[int, str, str]:
    """Kafka 4.4's ``kafka-dump-log.sh`` over ``files`` in one JVM (the command line of
    ``broker.dump_log_segments``): its exit status, stdout and stderr, a failure
    included."""
    if not jars_present(KAFKA44.jars):
        pytest.fail(f"Kafka 4.4's jars are not in {KAFKA44.jars}: run `make kafka-jars`",
                    pytrace=False)
    out = subprocess.run([JAVA, *CLIENT_JVM, "-cp", classpath(kafka=KAFKA44),
                          KAFKA44.dump_log, "--files", ",".join(map(str, files)), *flags],
                         capture_output=True, text=True, timeout=300)
    return out.returncode, out.stdout, out.stderr


def kafka_dump(files, *flags) -> str:
    code, out, err = kafka_run(files, *flags)
    if code != 0:
        raise AssertionError(f"DumpLogSegments failed ({code}):\n{err[-4000:]}")
    return out


def our_dump(files, *flags) -> tuple[int, str]:
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", newline="")
    err = io.StringIO()
    code = kafkalog(["dump", "--files", ",".join(map(str, files)), *flags], stdout=out,
                    stderr=err)
    out.flush()
    assert code in (0, 1), err.getvalue()
    # Kafka's output is read with universal newlines ("\r" and "\r\n" in printed
    # payloads become "\n"): read ours the same way
    return code, raw.getvalue().decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def assert_same(files, *flags, stops: list | None = None) -> str:
    """Both tools' stdout over ``files`` is the same, line for line; Kafka's stdout.

    Where Kafka's tool dies at an index entry whose batch is larger than
    --max-message-size (``OVERSIZE_DEATH``, exit 1, nothing more of any file), ours must
    stop at the same line with exit 1; the files after that index are then compared in
    a run of their own (their stdout appended), and the index is added to ``stops``. Any
    other failure of Kafka's tool fails the test."""
    files, text = list(files), ""
    while files:
        code, theirs, err = kafka_run(files, *flags)
        ours_code, ours = our_dump(files, *flags)
        if code != 0 and not all(what in err for what in OVERSIZE_DEATH):
            raise AssertionError(f"DumpLogSegments failed ({code}):\n{err[-4000:]}")
        if ours != theirs:
            diff = "\n".join(list(difflib.unified_diff(
                theirs.splitlines(), ours.splitlines(), "kafka 4.4", "kafkalog", n=1,
                lineterm=""))[:60])
            pytest.fail(f"dump {' '.join(flags)} differs:\n{diff}", pytrace=False)
        text += theirs
        if code == 0:
            return text
        assert ours_code == 1, f"kafkalog dump {' '.join(flags)} exit {ours_code}, " \
            "Kafka's tool died (exit 1)"
        last = theirs.rpartition("Dumping ")[2].split("\n", 1)[0]
        stopped = next(i for i, f in enumerate(files) if str(f) == last)
        assert str(files[stopped]).endswith(".index"), (last, err[-2000:])
        if stops is not None:
            stops.append(files[stopped])
        files = files[stopped + 1:]
    return text


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
    if "--max-message-size" in mode:            # batches over the size were dumped
        limit = int(mode[mode.index("--max-message-size") + 1])
        assert max(int(w) for w in re.findall(r" size: (\d+) magic", text)) > limit


def write_our_log(root) -> None:
    """A log our writer wrote: a topic per codec (none, gzip, lz4, zstd, snappy), two
    partitions, rolled segments with offset and time indexes (four commits), null keys
    and values, headers (one with a null value), values with "\t", "\r\n" and UTF-8,
    and in each topic one record of about 800 bytes: over --max-message-size's 300
    in MODES (whole batches are at most 280 bytes besides), so that Kafka's tool dies at
    the index entries pointing at the uncompressed and lz4, snappy, zstd ones."""
    from spark_kafkalog.log.write.config import AppendConfig
    from spark_kafkalog.log.write.table import write_table

    cfg = AppendConfig(segment_bytes=2000, index_interval_bytes=300, fsync=False)
    headers = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    n = 80
    for c, codec in enumerate(("none", "gzip", "lz4", "zstd", "snappy")):
        def value(i):
            if i % 11 == 5:
                return None
            if i == 37 + c:
                return ("big-" + "".join(f"{(i * 7919 + j * 104729) % 9973:04d}"
                                         for j in range(200))).encode()
            return (f"v{i}-" + "é" * (i % 4) + "ab\tc" * (i % 9)
                    + ("" if i % 13 else "\r\n")).encode()
        table = pa.table({
            "key": pa.array([None if i % 7 == 0 else f"k{i}".encode() for i in range(n)],
                            pa.binary()),
            "value": pa.array([value(i) for i in range(n)], pa.binary()),
            "timestamp": pa.array([1700000000000 + i * 10 for i in range(n)], pa.int64()),
            "headers": pa.array([[{"key": "h1", "value": b"v"}, {"key": "h2", "value": None}]
                                 if i % 3 == 0 else None for i in range(n)], headers),
            "partition": pa.array([i % 2 for i in range(n)], pa.int32())})
        for k in range(4):
            write_table(str(root), f"our-{codec}", table.slice(k * 20, 20), partitions=2,
                        compression=codec, batch_bytes=280, config=cfg)


@pytest.fixture(scope="module")
def our_log(tmp_path_factory):
    root = tmp_path_factory.mktemp("our-log")
    write_our_log(root)
    return root


@pytest.mark.parametrize("mode", MODES, ids=lambda m: " ".join(m) or "shallow")
def test_our_written_files(our_log, mode):
    """The same comparison on every file our writer wrote (it writes no .txnindex and
    no producer .snapshot: no producer ids, no transactions)."""
    files = sorted(f for p in sorted(our_log.iterdir()) if p.is_dir()
                   for f in p.iterdir() if f.suffix in KINDS)
    assert {f.suffix for f in files} == {".log", ".index", ".timeindex"}
    assert sum(f.suffix == ".log" for f in files) > 10      # 10 partitions, rolled
    stops: list = []
    text = assert_same(files, *mode, stops=stops)
    assert text.count("Dumping ") == len(files)
    if "--max-message-size" in mode:
        assert max(int(w) for w in re.findall(r" size: (\d+) magic", text)) > 300
        # where Kafka's tool died: the indexes of the topics whose big record stayed
        # over 300 bytes compressed or not (gzip squeezes it below)
        assert sorted(f.parent.name for f in stops) == [
            "our-lz4-1", "our-none-1", "our-snappy-1", "our-zstd-0"]
    else:
        assert stops == []


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
        assert_same(copies, flag, "--skip-record-metadata")    # decoded, after "| "


def test_cluster_metadata_log(kafka_broker, broker_topics, tmp_path):
    """The broker's KRaft log (control records: LeaderChange, KRaft version and voters)
    and its snapshots if any, copied so that the controller's appends meanwhile do not
    change what both tools read. This broker writes no snapshot (20 MB of metadata between
    snapshots): test_snapshot_and_share_state.py's broker does."""
    import shutil
    src = kafka_broker.home / "metadata" / "__cluster_metadata-0"   # metadata.log.dir
    dst = tmp_path / "__cluster_metadata-0"
    dst.mkdir()
    files = [shutil.copy(f, dst) for f in sorted(src.iterdir())
             if f.suffix in (".log", ".checkpoint") and f.stat().st_size > 0]
    assert files, "the broker wrote no __cluster_metadata segment"
    for flags in ([], ["--deep-iteration"], ["--print-data-log"],
                  ["--cluster-metadata-decoder"],
                  ["--cluster-metadata-decoder", "--skip-record-metadata"]):
        assert_same(files, *flags)


def share_records() -> list:
    """__share_group_state records built from Kafka 4.4's share-coordinator schemas:
    snapshots and updates (with and without the tagged deliveryCompleteCount), a
    tombstone, an unknown record type."""
    import struct
    import uuid

    from tests.log.logbuilder import rec

    def key(rtype, group, topic_id, partition):
        g = group.encode()
        return struct.pack(">hh", rtype, len(g)) + g + topic_id + struct.pack(">i", partition)

    def batches(items):
        out = bytes([len(items) + 1])
        for first, last, state, count in items:
            out += struct.pack(">qqbh", first, last, state, count) + b"\x00"
        return out

    def tags(complete):
        return b"\x00" if complete is None else b"\x01\x00\x04" + struct.pack(">i", complete)

    tid = uuid.UUID(int=0x0102030405060708090A0B0C0D0E0F10).bytes
    snap = (struct.pack(">hiiiq", 0, 1, 2, 3, 40) + struct.pack(">qq", 1700000000000,
            1700000000500) + batches([(40, 45, 0, 1), (46, 50, 2, 3)]))
    update = struct.pack(">hiiq", 0, 1, 3, -1) + batches([(51, 51, 4, 5)])
    return [rec(key(0, "sg", tid, 0), snap + tags(None)),
            rec(key(0, "sg", tid, 1), snap + tags(7)),
            rec(key(1, "sg", tid, 0), update + tags(None)),
            rec(key(1, "sg-é", tid, 2), update + tags(0)),
            rec(key(1, "sg", tid, 0), None),
            rec(key(9, "sg", tid, 0), b"\x00\x00")]


def test_share_group_state_decoder(tmp_path):
    from tests.log.logbuilder import LogDirBuilder
    b = LogDirBuilder(tmp_path / "logs")
    b.partition("__share_group_state", 0, base_timestamp=1000).append(share_records())
    b.write()
    files = sorted((b.roots[0] / "__share_group_state-0").glob("*.log"))
    text = assert_same(files, "--share-group-state-decoder")
    assert_same(files, "--share-group-state-decoder", "--skip-record-metadata")
    assert '"deliveryCompleteCount":7' in text and "<DELETE>" in text


def metadata_records() -> list:
    """KRaft metadata records built from Kafka 4.4's metadata schemas (frame version 1,
    apiKey, version, then the flexible record): a quota (float64, nullable string), a SCRAM
    credential (bytes), a partition with and without its tagged fields, and bytes that do
    not decode."""
    import struct
    import uuid

    from tests.log.logbuilder import rec

    def cs(text):                      # compact string (None: null)
        return b"\x00" if text is None else bytes([len(text.encode()) + 1]) + text.encode()

    def cb(data):                      # compact bytes
        return bytes([len(data) + 1]) + data

    def ints(values):                  # compact int32 array
        return bytes([len(values) + 1]) + b"".join(struct.pack(">i", v) for v in values)

    tid = uuid.UUID(int=0x1F2E3D4C5B6A79880102030405060708).bytes
    quota = (b"\x01\x0e\x00" + b"\x03" + cs("user") + cs("alice") + b"\x00"
             + cs("client-id") + cs(None) + b"\x00" + cs("consumer_byte_rate")
             + struct.pack(">d", 1048576.0) + b"\x00" + b"\x00")
    big = (b"\x01\x0e\x00" + b"\x02" + cs("ip") + cs(None) + b"\x00" + cs("connection_rate")
           + struct.pack(">d", 2.5e10) + b"\x01" + b"\x00")
    scram = (b"\x01\x0b\x00" + cs("bob") + b"\x01" + cb(b"salt\x00\xff") + cb(b"stored")
             + cb(b"server") + struct.pack(">i", 4096) + b"\x00")
    part = (b"\x01\x03\x00" + struct.pack(">i", 3) + tid + ints([1, 2]) + ints([1])
            + ints([]) + ints([]) + struct.pack(">iii", 1, 5, 6))
    part_tagged = part + b"\x01\x00\x01\x01"          # leaderRecoveryState=1
    part_plain = part + b"\x00"
    return [rec(None, quota), rec(None, big), rec(None, scram), rec(None, part_plain),
            rec(None, part_tagged), rec(None, b"\x01\x63\x00\x00")]


def test_cluster_metadata_decoder_on_our_log(tmp_path):
    from tests.log.logbuilder import LogDirBuilder
    b = LogDirBuilder(tmp_path / "logs")
    b.partition("__cluster_metadata", 0, base_timestamp=1000).append(metadata_records())
    b.write()
    files = sorted((b.roots[0] / "__cluster_metadata-0").glob("*.log"))
    text = assert_same(files, "--cluster-metadata-decoder")
    assert_same(files, "--cluster-metadata-decoder", "--skip-record-metadata")
    assert '"type":"CLIENT_QUOTA_RECORD"' in text and '"leaderRecoveryState":1' in text


def test_cluster_metadata_tables_match_kafkas_decoding(real_broker):
    """read_cluster_metadata's tables hold what Kafka 4.4's --cluster-metadata-decoder
    decodes from a real KRaft log: every record's type, version and fields, and the
    topics that exist at its end."""
    import json

    from spark_kafkalog.log import read_cluster_metadata
    log = real_broker / "niloufar-ldi-poc" / "__cluster_metadata-0" / \
        "00000000000000000000.log"
    theirs = [json.loads(line.split(" payload: ", 1)[1])
              for line in kafka_dump([log], "--cluster-metadata-decoder").splitlines()
              if " payload: " in line]
    state = read_cluster_metadata(str(real_broker / "niloufar-ldi-poc"))
    ours = [{"type": r["type"], "version": r["version"], "data": json.loads(r["data"])}
            for r in state.records().to_pylist()]
    assert len(ours) == len(theirs) > 4000
    assert [(o["type"], o["version"]) for o in ours] == \
        [(t["type"], t["version"]) for t in theirs]
    topics = {t["data"]["topicId"]: t["data"]["name"] for t in theirs
              if t["type"] == "TOPIC_RECORD"}
    for t in theirs:
        if t["type"] == "REMOVE_TOPIC_RECORD":
            topics.pop(t["data"]["topicId"], None)
    assert dict(zip(state.topics().column("topicId").to_pylist(),
                    state.topics().column("name").to_pylist())) == topics
    partitions = [t["data"] for t in theirs if t["type"] == "PARTITION_RECORD"]
    assert state.of("PARTITION_RECORD").select(
        ["partitionId", "topicId", "replicas", "isr", "leader"]).to_pylist() == \
        [{k: p[k] for k in ("partitionId", "topicId", "replicas", "isr", "leader")}
         for p in partitions]

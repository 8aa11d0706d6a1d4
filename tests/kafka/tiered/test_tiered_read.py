"""Topics a real broker tiered (KIP-405, LocalTieredStorage), read with no broker: both tiers
equal what Kafka's Java consumer read through the broker, under both isolation levels and
from an S3 copy of the remote tier; ``__remote_log_metadata`` decodes as Kafka 4.4's
``kafka-dump-log --remote-log-metadata-decoder`` prints it; a segment whose deletion
started is not read; a listed-but-missing remote object is data loss."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from spark_kafkalog.errors import DataLossError
from spark_kafkalog.format.remote_log_metadata import TOPIC, dump_text
from spark_kafkalog.log import LogDirs, read_table
from spark_kafkalog.log.read.reader import load_remote_metadata
from tests.kafka.broker import KAFKA44, dump_log_segments
from tests.kafka.compare import differences, from_arrow
from tests.kafka.test_dump_parity import assert_same
from tests.kafka.tiered.tiered_broker import overlapping
from tests.log.test_s3 import s3, s3_endpoint  # noqa: F401  (fixtures)

ISOLATIONS = ("read_uncommitted", "read_committed")


def _read(logdir, remote, topic, isolation, **kw):
    return from_arrow(read_table(logdir, topic, isolation_level=isolation,
                                 remote_storage=remote, **kw))


def test_most_of_every_topic_is_remote_only(tiered):
    """The setup the other tests rely on: each partition's local log starts well above 0
    and holds records, one of its segments is in both tiers, and >= 90% of the records
    are in the remote tier only."""
    assert all(overlapping(tiered.logdir, tiered.topics).values())
    logdirs = LogDirs(tiered.logdir)
    segs = load_remote_metadata(logdirs).segments().to_pylist()
    remote_only = total = 0
    for topic in tiered.topics:
        for p in logdirs.partitions(topic):
            local_start = p.segments[0].base_offset
            assert local_start > 0, p.path
            got = [r for r in tiered.expected(topic, "read_uncommitted")
                   if r["partition"] == p.partition]
            total += len(got)
            remote_only += sum(r["offset"] < local_start for r in got)
            assert any(r["offset"] >= local_start for r in got), p.path
            assert any(s["topic"] == topic and s["partition"] == p.partition for s in segs)
    assert remote_only / total >= 0.9, (remote_only, total)


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_both_tiers_equal_the_java_consumer(tiered, isolation):
    for topic in tiered.topics:
        ours = _read(tiered.logdir, tiered.remote, topic, isolation)
        assert differences(ours, tiered.expected(topic, isolation)) == [], topic


def test_without_the_remote_tier_earliest_is_the_local_log_start(tiered):
    topic = "tiered-gzip"
    # a broker checkpoints a tiered partition's log start below its local segments:
    # without the remote tier that is records missing, read on only when asked to
    ours = from_arrow(read_table(tiered.logdir, topic, fail_on_data_loss=False))
    starts = {p.partition: p.segments[0].base_offset
              for p in LogDirs(tiered.logdir).partitions(topic)}
    expected = [r for r in tiered.expected(topic, "read_uncommitted")
                if r["offset"] >= starts[r["partition"]]]
    assert expected and differences(ours, expected) == []


def _dump_payloads(files) -> dict[tuple[str, int], str]:
    text = dump_log_segments(files, "--remote-log-metadata-decoder", "--print-data-log",
                             kafka=KAFKA44)
    out, current = {}, None
    for line in text.splitlines():
        if line.startswith("Dumping "):
            current = Path(line[len("Dumping "):]).parent.name
        m = re.match(r"\| offset: (\d+) .* payload: (.*)$", line)
        if m:
            out[(current, int(m.group(1)))] = m.group(2)
    return out


def test_remote_log_metadata_decodes_as_kafka_44_prints_it(tiered):
    files = sorted(Path(tiered.logdir).glob(f"{TOPIC}-*/*.log"))
    kafka = _dump_payloads(files)
    table = read_table(LogDirs(tiered.logdir, include_internal=True), TOPIC,
                       read_past_high_watermark=True)
    ours = {(f"{TOPIC}-{r['partition']}", r["offset"]): dump_text(r["key"], r["value"])
            for r in table.to_pylist()}
    assert len(ours) > 100
    assert ours == kafka
    kinds = {v.split("{", 1)[0] for v in ours.values()}
    assert {"RemoteLogSegmentMetadata", "RemoteLogSegmentMetadataUpdate"} <= kinds


@pytest.mark.parametrize("flags", [["--remote-log-metadata-decoder"],
                                   ["--remote-log-metadata-decoder", "--print-data-log",
                                    "--deep-iteration"],
                                   ["--remote-log-metadata-decoder",
                                    "--skip-record-metadata"]],
                         ids=["decoder", "decoder+print-data-log+deep",
                              "decoder+skip-record-metadata"])
def test_kafkalog_dump_remote_log_metadata_stdout_equals_kafka_44(tiered, flags):
    """Issue 29: ``kafkalog dump --remote-log-metadata-decoder`` (the command, run in
    process) prints Kafka 4.4's ``kafka-dump-log.sh`` stdout with the same flags, line for
    line, over every .log of the broker's ``__remote_log_metadata`` partitions (the broker
    is stopped: the files are at rest, empty partitions' segments included)."""
    files = sorted(Path(tiered.logdir).glob(f"{TOPIC}-*/*.log"))
    assert len({f.parent for f in files}) > 1
    text = assert_same(files, *flags)
    assert text.count("Dumping ") == len(files)
    payloads = re.findall(r" payload: (\w+)\{", text)
    assert len(payloads) > 100, len(payloads)
    assert {"RemoteLogSegmentMetadata", "RemoteLogSegmentMetadataUpdate"} <= set(payloads)


def _copy(tiered, tmp_path) -> tuple[str, str]:
    logdir, remote = tmp_path / "data", tmp_path / "remote"
    shutil.copytree(tiered.logdir, logdir)
    shutil.copytree(tiered.remote, remote)
    return str(logdir), str(remote)


def _segments(tiered, topic, partition):
    rows = load_remote_metadata(LogDirs(tiered.logdir)).segments().to_pylist()
    return sorted((r for r in rows if r["topic"] == topic and r["partition"] == partition),
                  key=lambda r: r["start_offset"])


def test_a_missing_remote_object_is_data_loss(tiered, tmp_path):
    topic, part = "tiered-zstd", 1
    logdir, remote = _copy(tiered, tmp_path)
    seg = _segments(tiered, topic, part)[1]
    gone = next(Path(remote).glob(f"{topic}-{part}-*/"
                                  f"{seg['start_offset']:020d}-{seg['segment_id']}.log"))
    gone.unlink()
    with pytest.raises(DataLossError) as err:
        read_table(logdir, topic, remote_storage=remote)
    msg = str(err.value)
    assert f"{topic}-{part}" in msg and str(gone) in msg
    assert f"offsets {seg['start_offset']}..{seg['end_offset']}" in msg
    ours = _read(logdir, remote, topic, "read_uncommitted", fail_on_data_loss=False)
    lost = range(seg["start_offset"], seg["end_offset"] + 1)
    expected = [r for r in tiered.expected(topic, "read_uncommitted")
                if not (r["partition"] == part and r["offset"] in lost)]
    assert differences(ours, expected) == []


def _append_update(logdir: str, seg: dict, state: int) -> None:
    """Append a RemoteLogSegmentMetadataUpdateRecord (v0) moving ``seg`` to ``state`` to
    the copy's ``__remote_log_metadata``, through the writer (bytes laid out here by hand
    from Kafka's schema, not by our decoder)."""
    import base64
    import struct

    import pyarrow as pa

    from spark_kafkalog.log.write.table import write_table

    def uvarint(n):
        out = b""
        while True:
            if n < 0x80:
                return out + bytes([n])
            out += bytes([(n & 0x7F) | 0x80])
            n >>= 7

    def uuid(text):
        return base64.urlsafe_b64decode(text + "==")

    name = seg["topic"].encode()
    body = (uvarint(len(name) + 1) + name + uuid(seg["topic_id"])
            + struct.pack(">i", seg["partition"]) + b"\x00"      # TopicIdPartition + tags
            + uuid(seg["segment_id"]) + b"\x00"                   # RemoteLogSegmentId + tags
            + struct.pack(">iq", 1, 1_800_000_000_000)            # BrokerId, EventTimestampMs
            + b"\x00"                                              # CustomMetadata: null
            + struct.pack(">b", state) + b"\x00")                 # state, tagged fields
    value = uvarint(1) + uvarint(1) + uvarint(0) + body
    part = seg["metadata_partition"]
    write_table(logdir, TOPIC, pa.table({"value": pa.array([value], pa.binary()),
                                         "partition": pa.array([part], pa.int32())}),
                allow_internal_topic=True)


def test_a_segment_whose_deletion_started_is_not_read(tiered, tmp_path):
    topic, part = "tiered-lz4", 0
    logdir, remote = _copy(tiered, tmp_path)
    segs = _segments(tiered, topic, part)
    first, middle = segs[0], segs[2]
    _append_update(logdir, first, 2)          # DELETE_SEGMENT_STARTED: the log start moves up
    now = load_remote_metadata(LogDirs(logdir)).segments().to_pylist()
    assert [s["state"] for s in now if s["segment_id"] == first["segment_id"]] == \
        ["DELETE_SEGMENT_STARTED"]
    ours = _read(logdir, remote, topic, "read_uncommitted")
    expected = [r for r in tiered.expected(topic, "read_uncommitted")
                if r["partition"] != part or r["offset"] > first["end_offset"]]
    assert differences(ours, expected) == []
    _append_update(logdir, middle, 2)         # a hole in the middle: data loss
    with pytest.raises(DataLossError, match=f"{topic}-{part}: offsets "
                       f"{middle['start_offset']}..{middle['end_offset']} were promised"):
        read_table(logdir, topic, remote_storage=remote)


def test_the_remote_tier_from_s3(tiered, s3):
    options, fs, bucket = s3
    pafs.copy_files(tiered.remote, f"{bucket}/tiered", source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=fs)
    for isolation in ISOLATIONS:
        for topic in tiered.topics:
            ours = from_arrow(read_table(tiered.logdir, topic, isolation_level=isolation,
                                         remote_storage=f"s3://{bucket}/tiered",
                                         filesystem_options=options))
            assert differences(ours, tiered.expected(topic, isolation)) == [], topic

"""The real broker files of ../shared/fixtures/real-broker read back with the counts and
digests of their MANIFEST.md (computed there with kafka-python)."""
import hashlib

import pytest

from spark_kafkalog.errors import CorruptRecordError
from spark_kafkalog.log import LogDirs, ReadStats, read_partition, read_table

# partition dir -> (data records, sha256 digest per the manifest's recipe)
MANIFEST = {
    "donaldy-kafka-2.7.1/__consumer_offsets-17":
        (3, "b3cbff2d906b2b96285d62a54aa51a35651f6231390a9416857fe0040f694361"),
    "donaldy-kafka-2.7.1/__consumer_offsets-28":
        (2, "1ea054c1c2bdb660186f4b07cbd320526ace99259fcd01a065474bc56a7fc567"),
    "donaldy-kafka-2.7.1/__consumer_offsets-33":
        (3, "1f03cebed9da6264dd8ebd42b4c786b0968abe8a30b940cd5a800656d9f39427"),
    "donaldy-kafka-2.7.1/__consumer_offsets-39":
        (5, "bbf408f41a0ffe0e150dffbfd77c97b4ab50bdf5077edda44dcb475445c0edd8"),
    "donaldy-kafka-2.7.1/__consumer_offsets-8":
        (3, "5fa9cb92a823b8be1044027da5f5ac662405f6b9ace60074a7498f8e80b02de1"),
    "donaldy-kafka-2.7.1/myTopic-0":
        (0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    "iechenyb-data/string-key-0":
        (28162, "dc124cce5fd0fbd6cfc8efb8548c10605bd43b377cef7467e8e9731be8cb1913"),
    "kafka-rust-testdata/fetch1.mytopic.1p.gzip.kafka.0821-0":
        (42, "f1543d71d32655e00125cf8c2d8ee0e7de6b803932047fa43166a3685927410c"),
    "kafka-rust-testdata/fetch1.mytopic.1p.nocompression.kafka.0821-0":
        (42, "f1543d71d32655e00125cf8c2d8ee0e7de6b803932047fa43166a3685927410c"),
    "kafka-rust-testdata/fetch1.mytopic.1p.snappy.kafka.0821-0":
        (42, "f1543d71d32655e00125cf8c2d8ee0e7de6b803932047fa43166a3685927410c"),
    "kafka-rust-testdata/fetch1.mytopic.1p.snappy.kafka.0822-0":
        (42, "f1543d71d32655e00125cf8c2d8ee0e7de6b803932047fa43166a3685927410c"),
    "kafka-rust-testdata/fetch2.mytopic.nocompression.kafka.0900-0":
        (1, "01ecb61fcba90ded7aecd56368e66f1ce60d865851127bc95e636076ce54941d"),
    "niloufar-ldi-poc/Retry.TestTopicPatient-0":
        (0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    "niloufar-ldi-poc/TestTopicPatient-0":
        (3, "f775209b5c2daf010233ce3f8e37474fe989bff9a4e8c9998598f08f5aefb0eb"),
    "niloufar-ldi-poc/__cluster_metadata-0":
        (4928, "d3d35c818d2518173e2da9b5052d2ba0fd5eceeeff683c1b3278cb331b79f27c"),
    "niloufar-ldi-poc/__consumer_offsets-6":
        (13, "002848e3cfc2ec062f99075f2cc2eb2f7fa957bdf091022cf53a6d52f4cb51af"),
    "seanorth-kafka-server/__consumer_offsets-16":
        (69, "c6be1395a519cccbb55a33d3468f5218070d9c429cabe3df746a3f32c65077f1"),
    "seanorth-kafka-server/some-topic-0":
        (9, "7c805f24650cd536ad11d3444c8e55cf89d0c930d65a496f836834d9f9fde572"),
    "kafka-0.10-magic1/TEST-TOPIC-0":
        (21211, "15317de2146d57bf2c1f7329bcd7c5fba79f22c320e8f71848d41a92324501f3"),
    "kafka-0.10-magic1/__consumer_offsets-40":
        (860, "f156be408a811a554dd6c513a6bb66dd16d142b82d1c6bbbc3d6ff20372d0b0e"),
    "kafka-0.10-magic1/foo-0":
        (204, "2b918465c57fca1b0259df4760fcea9bf258b1e63307dab274a62f3bcc8f427a"),
    "kafka-0.10-magic1/topic1-0":
        (5, "85f32a32196ecc81a6377a82b72ce52d498e5012420dc574bc3702ef34bc58bf"),
}


def _digest(table) -> str:
    h = hashlib.sha256()
    for o, k, v in zip(table.column("offset").to_pylist(), table.column("key").to_pylist(),
                       table.column("value").to_pylist()):
        h.update(repr((o, k, v)).encode("ascii"))
    return h.hexdigest()


def _split(name):
    root, part_dir = name.split("/")
    topic, _, part = part_dir.rpartition("-")
    return root, topic, int(part)


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_manifest_counts_and_digests_to_log_end(real_broker, name):
    root, topic, part = _split(name)
    count, digest = MANIFEST[name]
    t = read_table(str(real_broker / root), topic, partitions=[part],
                   read_past_high_watermark=True)
    assert t.num_rows == count
    assert _digest(t) == digest
    assert t.column("offset").to_pylist() == sorted(t.column("offset").to_pylist())


def test_high_watermark_bounds_what_a_consumer_sees(real_broker):
    logdirs = LogDirs(str(real_broker / "kafka-0.10-magic1"))
    p = logdirs.partition("__consumer_offsets", 40)
    s = logdirs.state(p)
    assert (s.log_start_offset, s.high_watermark, s.log_end_offset, s.upper_bound) == \
        (0, 856, 860, 856)
    bounded = read_table(logdirs, "__consumer_offsets", partitions=[40])
    assert bounded.num_rows == 856 and bounded.column("offset")[-1].as_py() == 855
    full = read_table(logdirs, "__consumer_offsets", partitions=[40],
                      read_past_high_watermark=True)
    assert full.num_rows == 860
    assert full.slice(0, 856).equals(bounded)


def test_states(real_broker):
    d = LogDirs(str(real_broker / "donaldy-kafka-2.7.1"))
    s = d.state(d.partition("myTopic", 0))      # everything deleted: empty active segment
    assert (s.log_start_offset, s.high_watermark, s.log_end_offset) == (38, 38, 38)
    s = d.state(d.partition("__consumer_offsets", 39))
    assert (s.log_start_offset, s.log_end_offset, s.high_watermark) == (0, 20, 20)
    assert s.max_timestamp == 1686446865837
    n = LogDirs(str(real_broker / "niloufar-ldi-poc"))
    s = n.state(n.partition("__cluster_metadata", 0), isolation_level="read_committed")
    assert (s.log_end_offset, s.high_watermark, s.last_stable_offset) == (4929, 4929, 4929)
    assert (s.first_timestamp, s.max_timestamp) == (1769791434545, 1769793835851)


def test_corrupt_crc_fixture(real_broker):
    root = str(real_broker / "kafka-rust-testdata")
    topic = "fetch2.mytopic.nocompression.invalid_crc.kafka.0900"
    with pytest.raises(CorruptRecordError) as e:
        read_table(root, topic)
    msg = str(e.value)
    assert "00000000000000000000.log" in msg and "position 0" in msg and "offset 0" in msg
    assert read_table(root, topic, on_corruption="skip").num_rows == 0
    assert read_table(root, topic, on_corruption="stop").num_rows == 0
    logdirs = LogDirs(root)
    p = logdirs.partition(topic, 0)
    stats = ReadStats()
    got = list(read_partition(logdirs, p, start_offset=0, end_offset=10,
                              on_corruption="skip", stats=stats))
    assert got == [] and [(s.start, s.end, s.offset) for s in stats.skipped] == [(0, 497, 0)]
    assert "CRC" in stats.skipped[0].reason

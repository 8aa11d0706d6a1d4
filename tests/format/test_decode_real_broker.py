"""Segments written by real Kafka brokers (0.8.2 to 3.7, magic 0, 1 and 2; see
../shared/fixtures/real-broker/MANIFEST.md): every partition decodes to the record count
and the sha256 digest of repr((offset, key, value)) that kafka-python found, and
scan_headers walks every segment to its end."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from spark_kafkalog.errors import CorruptRecordError
from spark_kafkalog.format.decode import decode, decode_run, scan_headers
from tests.format.builders import rows

from tests.conftest import REAL_BROKER as FIXTURES
from tests.conftest import require_real_broker

INVALID_CRC = "kafka-rust-testdata/fetch2.mytopic.nocompression.invalid_crc.kafka.0900-0"


@pytest.fixture(autouse=True)
def _fixtures_present():
    """Every test here reads the fixtures: a skip without them, a failure under CI."""
    require_real_broker()


def _manifest() -> dict[str, tuple[int, str]]:
    """partition dir -> (data records, digest), from the MANIFEST's two tables."""
    text = (FIXTURES / "MANIFEST.md").read_text()
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(
        r"^\| `([^`]+)` \| (?:\d+) \| (?:\d+) \| [^|]+\| [^|]+\| (\d+) \|", text, re.M)}
    digests = {m.group(1): m.group(2) for m in re.finditer(
        r"^\| `([^`]+)` \| `([0-9a-f]{64})` \|", text, re.M)}
    return {p: (counts[p], d) for p, d in digests.items()}


# one placeholder without the fixtures, so that the tests run and say so
PARTITIONS = sorted(_manifest()) if (FIXTURES / "MANIFEST.md").is_file() \
    else ["<fixtures missing>"]


def _segments(part: str) -> list[Path]:
    return sorted((FIXTURES / part).glob("*.log"))


@pytest.mark.parametrize("part", PARTITIONS)
def test_partition_count_and_digest(part):
    count, digest = _manifest()[part]
    h = hashlib.sha256()
    n = 0
    verify = part != INVALID_CRC
    for seg in _segments(part):
        batch = decode(seg.read_bytes(), topic=part.rsplit("/", 1)[1].rsplit("-", 1)[0],
                       verify_crc=verify)
        batch.validate(full=True)
        for off, key, value in zip(batch.column("offset").to_pylist(),
                                   batch.column("key").to_pylist(),
                                   batch.column("value").to_pylist()):
            h.update(repr((off, key, value)).encode("ascii"))
            n += 1
    assert n == count
    assert h.hexdigest() == digest


@pytest.mark.parametrize("part", PARTITIONS)
def test_scan_headers_reaches_the_end(part):
    for seg in _segments(part):
        data = seg.read_bytes()
        scan = scan_headers(data, verify_crc=part != INVALID_CRC, position_base=10)
        assert scan.problem is None, scan.problem
        assert scan.end == 10 + len(data)
        if len(data):
            sizes = scan.headers.column("size").to_pylist()
            assert sum(sizes) == len(data)


def test_invalid_crc_fixture():
    data = _segments(INVALID_CRC)[0].read_bytes()
    with pytest.raises(CorruptRecordError, match="CRC-32 mismatch") as info:
        decode(data)
    assert (info.value.position, info.value.offset) == (0, 0)
    assert decode(data, verify_crc=False).num_rows == 1
    scan = scan_headers(data, verify_crc=True)
    assert scan.problem.kind == "corrupt" and scan.end == 0


def test_kraft_metadata_log_leader_change_is_not_a_row():
    data = _segments("niloufar-ldi-poc/__cluster_metadata-0")[0].read_bytes()
    first = scan_headers(data).headers.slice(0, 1).to_pylist()[0]
    assert (first["is_control"], first["control_type"], first["base_offset"]) == (True, 2, 0)
    got = rows(decode(data))
    assert got[0].offset == 1 and len(got) == 4928


def test_magic1_timestamps_and_high_watermark_window():
    data = _segments("kafka-0.10-magic1/__consumer_offsets-40")[0].read_bytes()
    # a reader bounded by the high watermark (856, from the checkpoint) sees 856 records
    assert decode_run(data, end_offset=856).num_rows == 856
    got = rows(decode(data))
    assert len(got) == 860 and all(r.timestamp_type == 0 for r in got)


def test_spring_headers_on_xerial_snappy_batches():
    data = _segments("seanorth-kafka-server/some-topic-0")[0].read_bytes()
    got = rows(decode(data))
    assert len(got) == 9
    assert all(r.headers and r.headers[0][0] == "__Key_TypeId__" for r in got)


def test_iechenyb_single_record_batches_with_no_timestamp():
    data = _segments("iechenyb-data/string-key-0")[0].read_bytes()
    batch = decode(data)
    assert batch.num_rows == 28162
    # NO_TIMESTAMP reads as -1 ms (Spark's Kafka source), never as null
    assert batch.column("timestamp").null_count == 0
    assert batch.column("timestamp").cast("int64").to_pylist().count(-1000) == 20007
    assert batch.column("key").null_count == 28162
    assert scan_headers(data).headers.num_rows == 28068

"""The fuzz targets: each takes one input (bytes) and feeds it to one parser of untrusted
bytes. The contract every parser keeps, and a target checks: a result, or one of our own
errors (:class:`KafkaLogError`); anything else -- another exception, a crash, a sanitizer
report, a hang, an unbounded allocation -- is a finding.

Inputs start with a flags byte that picks options (CRC checked or not, headers, offset
bounds, which record type); formats guarded by a checksum have it recomputed when flag
bit 0 is set, so the fuzzer reaches the parser behind the checksum. ``seeds(name)`` gives
each target's starting inputs, taken from the real-broker fixtures (never copied into the
repo) and from small logs our writer makes.
"""
from __future__ import annotations

import importlib.util
import struct
from pathlib import Path
from typing import Callable, Iterator

import crc32c

from spark_kafkalog.errors import KafkaLogError

REPO = Path(__file__).resolve().parents[1]


def _real_broker_dir() -> Path:
    """The tests' own rule (``tests/fixture_dirs.py``), loaded from this checkout by path:
    ``import tests`` could find another checkout's package first."""
    spec = importlib.util.spec_from_file_location(
        "_kafkalog_fixture_dirs", REPO / "tests" / "fixture_dirs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.real_broker_dir(REPO)


REAL_BROKER = _real_broker_dir()
#: largest input a target is given (libFuzzer's -max_len)
MAX_LEN = 1 << 16
MAX_DECOMPRESSED = 1 << 20


class Finding(AssertionError):
    """A parser broke its contract without raising (a wrong result)."""


def _decode_module():
    """``spark_kafkalog.format.decode`` (the package exports a function of that name)."""
    import importlib

    return importlib.import_module("spark_kafkalog.format.decode")


def _split(data: bytes) -> tuple[int, bytes]:
    return (data[0], data[1:]) if data else (0, b"")


def _i64(data: bytes, at: int) -> int | None:
    """An optional offset bound taken from the input's tail (None when too short)."""
    return struct.unpack_from(">q", data, at)[0] if len(data) >= at + 8 else None


# ---- record batches (the compiled kernels) ---------------------------------------------------

def decode_buffer(data: bytes) -> None:
    decode = _decode_module()

    flags, body = _split(data)
    start = (flags >> 4) & 3 if flags & 4 else None
    end = start + ((flags >> 6) & 3) + 1 if start is not None and flags & 8 else None
    try:
        batch = decode.decode_run(body, verify_crc=bool(flags & 1),
                                  include_headers=bool(flags & 2),
                                  max_decompressed_bytes=MAX_DECOMPRESSED,
                                  start_offset=start, end_offset=end)
    except KafkaLogError:
        return
    batch.validate(full=True)


def scan_buffer(data: bytes) -> None:
    """``scan_header_rows`` never raises for bad data; what ``decode`` accepts whole, the
    scan accepts whole (the log layer scans with one and reads with the other)."""
    decode = _decode_module()

    flags, body = _split(data)
    hint = _i64(body, 0) if flags & 2 else None
    hint = None if hint is None else hint & ((1 << 63) - 1)     # an offset: >= 0
    scan = decode.scan_header_rows(body, verify_crc=bool(flags & 1), first_offset_hint=hint)
    if scan.problem is None and scan.end != len(body):
        raise Finding(f"scan ended at {scan.end} of {len(body)} with no problem")
    if flags & 4 and scan.problem is not None:
        try:
            decode.decode_run(body, verify_crc=bool(flags & 1),
                              max_decompressed_bytes=MAX_DECOMPRESSED)
        except KafkaLogError:
            return
        raise Finding(f"decode accepted what the scan refused: {scan.problem}")


def decode_segments(data: bytes) -> None:
    decode = _decode_module()

    flags, body = _split(data)
    seg_base = flags & 7
    start = seg_base + ((flags >> 3) & 3)
    end = (1 << 63) - 1 if flags & 0x20 else start + 100
    reach = start + 3 if flags & 0x40 else None
    segments = [(body, "t", 0, start, end, seg_base, seg_base + (1 << 31), reach)]
    if flags & 0x80:       # two segments: the input split at its middle
        half = len(body) // 2
        segments = [(body[:half], "t", 0, 0, 1 << 20, 0, 1 << 20, None),
                    (body[half:], "t", 1, 0, 1 << 40, 0, 1 << 31, None)]
    try:
        batch = decode.decode_segments(segments, include_headers=bool(flags & 1),
                                       max_decompressed_bytes=MAX_DECOMPRESSED)
    except KafkaLogError:
        return
    if batch is not None:
        batch.validate(full=True)


# ---- the files beside the .log -----------------------------------------------------------------

def offset_index(data: bytes) -> None:
    from spark_kafkalog.log.files import index

    flags, body = _split(data)
    index.parse_offset_index(body, flags * 1000, segment_size=None if flags & 1 else 1 << 20,
                             next_base_offset=None if flags & 2 else flags * 1000 + 5000)


def time_index(data: bytes) -> None:
    from spark_kafkalog.log.files import index

    flags, body = _split(data)
    index.parse_time_index(body, flags * 1000,
                           next_base_offset=None if flags & 2 else flags * 1000 + 5000)


def txn_index(data: bytes) -> None:
    from spark_kafkalog.log.files import txn

    flags, body = _split(data)
    try:
        txn.parse_txn_index(body, segment_base_offset=None if flags & 1 else 0,
                            next_base_offset=None if flags & 2 else 1 << 20)
    except KafkaLogError:
        pass


def producer_snapshot(data: bytes) -> None:
    from spark_kafkalog.log.files import txn

    flags, body = _split(data)
    if flags & 1 and len(body) >= txn.SNAPSHOT_HEADER.size:
        fixed = bytearray(body)
        struct.pack_into(">I", fixed, txn.SNAPSHOT_CRC_FROM - 4,
                         crc32c.crc32c(bytes(fixed[txn.SNAPSHOT_CRC_FROM:])))
        body = bytes(fixed)
    try:
        txn.parse_producer_snapshot(body, 0)
    except KafkaLogError:
        pass


def checkpoint(data: bytes) -> None:
    from spark_kafkalog.log.files import checkpoint as cp

    flags, body = _split(data)
    try:
        if flags & 1:
            cp.parse_leader_epoch_checkpoint(body)
        else:
            cp.parse_checkpoint(body)
    except KafkaLogError:
        pass


def journal(data: bytes) -> None:
    from spark_kafkalog.log.files import journal as jr

    flags, body = _split(data)
    if flags & 1:          # a well-formed header over the fuzzed body
        body = (f"{jr.JOURNAL_MAGIC} {jr.JOURNAL_VERSION} {crc32c.crc32c(body):08x} "
                f"{len(body)}\n").encode() + body
    try:
        state = jr.parse(body, "<journal>", "t")
        state.encode()
    except KafkaLogError:
        pass


def coordinator_record(data: bytes) -> None:
    """A ``__consumer_offsets`` or ``__transaction_state`` record's key or value."""
    from spark_kafkalog.format.coordinator import records

    flags, body = _split(data)
    which = flags % 6
    try:
        if which == 0:
            records.decode_group_key(body)
        elif which == 1:
            records.decode_group_value(_i16(body), body[2:])
        elif which == 2:
            records.decode_txn_key(body)
        elif which == 3:
            records.decode_txn_value(body)
        elif which == 4:
            records.decode_subscription(body)
        else:
            records.decode_assignment(body)
    except KafkaLogError:
        pass


def internal_record(data: bytes) -> None:
    """A ``__remote_log_metadata``, ``__cluster_metadata`` or ``__share_group_state``
    record: decoded, folded into the per-segment state, and printed as Kafka's
    kafka-dump-log decoders print it."""
    from spark_kafkalog.format import cluster_metadata, remote_log_metadata
    from spark_kafkalog.format.coordinator import share

    flags, body = _split(data)
    which = flags % 3
    try:
        if which == 0:
            remote_log_metadata.decode_value(body)
            remote_log_metadata.dump_text(None, body, 0)
            state = remote_log_metadata.RemoteLogMetadataState()
            state.add(body, 0, 0, 0)
            state.segments()
        elif which == 1:
            cluster_metadata.decode_metadata_record(body)
            cluster_metadata.cluster_metadata_text(None, body, 0)
        else:
            cut = body[0] if body else 0
            share.share_group_state_text(body[1:1 + cut], body[1 + cut:] or None, 0)
    except KafkaLogError:
        pass


def _i16(data: bytes) -> int:
    return struct.unpack_from(">h", data, 0)[0] if len(data) >= 2 else 0


# ---- Avro values (typed/_avro) ----------------------------------------------------------------

#: the reader schemas of the avro_values target (flags & 3 picks one); id 2 is an older
#: writer of each (fields the reader adds with defaults, an int the reader reads as long)
AVRO_SCHEMAS = [
    {"type": "record", "name": "A", "fields": [
        {"name": "s", "type": "string"}, {"name": "n", "type": ["null", "long"]},
        {"name": "r", "type": {"type": "record", "name": "In", "fields": [
            {"name": "b", "type": "boolean"}, {"name": "f", "type": "float"}]}},
        {"name": "u", "type": ["int", "string", {"type": "array", "items": "double"}, "null"]},
        {"name": "i", "type": "long"}]},
    {"type": "record", "name": "B", "fields": [
        {"name": "m", "type": {"type": "map", "values": {"type": "array", "items": ["null", "bytes"]}}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y", "Z"]}},
        {"name": "i", "type": "long"}]},
    {"type": "record", "name": "C", "fields": [
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 3}},
        {"name": "x", "type": {"type": "fixed", "name": "F", "size": 3, "logicalType": "decimal",
                               "precision": 6, "scale": 0}},
        {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "a", "type": {"type": "array", "items": "null"}},
        {"name": "i", "type": "long"}]},
    {"type": "array", "items": {"type": "record", "name": "D", "fields": [
        {"name": "k", "type": "string"}, {"name": "v", "type": ["null", "int"]}]}},
]


def _avro_writer(schema: dict) -> dict:
    """An older writer of ``schema``: its record's last field an int, no fields the reader
    defaults (added with defaults to the reader below)."""
    import copy

    w = copy.deepcopy(schema)
    if w["type"] == "record":
        w["fields"][-1] = {"name": w["fields"][-1]["name"], "type": "int"}
    return w


def _avro_reader(schema: dict) -> dict:
    import copy

    r = copy.deepcopy(schema)
    if r["type"] == "record":
        r["fields"].append({"name": "added", "type": ["null", "string"], "default": None})
    return r


_AVRO_DECODERS: dict[int, tuple] = {}


def _avro_decoder(variant: int):
    """The decoder of a flags variant, built once (building is Python: it would dominate
    every execution)."""
    import json

    from spark_kafkalog.typed.avro import AvroDecoder

    if variant not in _AVRO_DECODERS:
        schema = AVRO_SCHEMAS[variant & 3]
        if variant & 4:
            _AVRO_DECODERS[variant] = (AvroDecoder(json.dumps(schema)), "none")
        else:
            _AVRO_DECODERS[variant] = (AvroDecoder(json.dumps(_avro_reader(schema)), {
                1: json.dumps(schema), 2: json.dumps(_avro_writer(schema))}), "confluent")
    return _AVRO_DECODERS[variant]


def avro_values(data: bytes) -> None:
    """Avro values (one length byte each, then the bytes) decoded by ``AvroDecoder``:
    flags & 3 the schema, & 4 unframed (the reader's own schema) or schema-registry framed
    (ids 1: the schema, 2: an older writer); each mode must give a valid Arrow array, a
    bad record being a null with its error (``null``) or a TypedRecordError (``fail``)."""
    import pyarrow as pa

    from spark_kafkalog.errors import TypedRecordError

    flags, body = _split(data)
    values, at = [], 0
    while at < len(body):
        n = body[at]
        values.append(body[at + 1:at + 1 + n])
        at += 1 + n
    column = pa.array(values, type=pa.binary())
    dec, framing = _avro_decoder(flags & 7)
    res = dec.decode(column, framing=framing, on_error="null")
    res.array.validate(full=True)
    bad = res.errors.to_pylist()
    if [e is None for e in bad] != res.array.is_valid().to_pylist():
        raise Finding("a row is null without an error, or has an error and a value")
    try:
        strict = dec.decode(column, framing=framing)
    except TypedRecordError as err:
        if bad[err.row] is None:
            raise Finding(f"fail mode refused row {err.row}, which null mode decoded") from err
    else:
        if any(e is not None for e in bad) or not strict.array.equals(res.array):
            raise Finding("fail mode decoded what null mode refused")


def _avro_seeds() -> Iterator[bytes]:
    import io

    import fastavro

    samples = [
        {"s": "héllo", "n": None, "r": {"b": True, "f": 1.5}, "u": [1.0, 2.0], "i": 3},
        {"m": {"a": [None, b"x"], "": []}, "e": "Z", "i": -1},
        {"d": b"\x01\x02", "x": b"\x00\x00\x07", "t": 1_600_000_000_000, "a": [None, None], "i": 9},
        [{"k": "k", "v": None}, {"k": "", "v": 7}],
    ]
    for k, (schema, sample) in enumerate(zip(AVRO_SCHEMAS, samples)):
        for writer, sid in ((schema, 1), (_avro_writer(schema), 2)):
            if writer is not schema and isinstance(sample, dict):
                sample = dict(sample, i=5)
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, fastavro.parse_schema(writer), sample)
            raw = buf.getvalue()
            framed = b"\x00" + struct.pack(">I", sid) + raw
            yield bytes([k]) + bytes([len(framed)]) + framed + bytes([len(framed) - 1]) + framed[:-1]
            yield bytes([k | 4]) + bytes([len(raw)]) + raw


TARGETS: dict[str, Callable[[bytes], None]] = {
    "decode_buffer": decode_buffer,
    "scan_buffer": scan_buffer,
    "decode_segments": decode_segments,
    "offset_index": offset_index,
    "time_index": time_index,
    "txn_index": txn_index,
    "producer_snapshot": producer_snapshot,
    "checkpoint": checkpoint,
    "journal": journal,
    "coordinator_record": coordinator_record,
    "internal_record": internal_record,
    "avro_values": avro_values,
}


# ---- seeds ----------------------------------------------------------------------------------------

def _fixture_files(*suffixes: str) -> Iterator[Path]:
    if not REAL_BROKER.is_dir():
        return
    for path in sorted(REAL_BROKER.rglob("*")):
        if path.is_file() and (path.suffix in suffixes or path.name in suffixes):
            yield path


def _batches(limit: int = 400) -> Iterator[bytes]:
    """Whole batches (one each, and runs of three) cut out of the fixtures' .log files,
    kept small, one per (magic, attributes) kind and file."""
    decode = _decode_module()

    for path in _fixture_files(".log"):
        with open(path, "rb") as f:
            head = f.read(1 << 20)
        rows = decode.scan_header_rows(head).headers
        seen = set()
        for i, row in enumerate(rows):
            kind = (int(row["magic"]), int(row["attributes"]))
            size = int(row["size"])
            if kind in seen or size > MAX_LEN - 1:
                continue
            seen.add(kind)
            pos = int(row["position"])
            yield head[pos:pos + size]
            if i + 2 < len(rows):
                run_end = int(rows[i + 2]["position"]) + int(rows[i + 2]["size"])
                if run_end - pos < MAX_LEN - 1:
                    yield head[pos:run_end]
            limit -= 1
            if limit <= 0:
                return


def _prefixes(*suffixes: str, size: int = 4096) -> Iterator[bytes]:
    for path in _fixture_files(*suffixes):
        with open(path, "rb") as f:
            data = f.read(size)
        if data.strip(b"\0"):
            yield data


def _journal_seed() -> bytes:
    import tempfile

    import pyarrow as pa
    import pyarrow.fs as pafs

    from spark_kafkalog.log.files import journal as jr
    from spark_kafkalog.log.write import write_table

    with tempfile.TemporaryDirectory() as tmp:
        table = pa.table({"value": [b"a", b"b", b"c"]})
        write_table(tmp, "t", table)
        write_table(tmp, "t", table)
        return Path(jr.journal_path(tmp, "t")).read_bytes()


def _fixture_records(topic: str, limit: int) -> Iterator[tuple[bytes | None, bytes | None, str]]:
    """``(key, value, path)`` of the first ``limit`` records of the first window of each
    fixture segment of ``topic`` (an internal topic's records, for its decoders' seeds)."""
    decode = _decode_module()

    for path in _fixture_files(".log"):
        if topic not in str(path):
            continue
        with open(path, "rb") as f:
            head = f.read(1 << 18)
        scan = decode.scan_header_rows(head)
        try:
            batch = decode.decode_run(head[:scan.end], verify_crc=False)
        except KafkaLogError:
            continue
        for key, value in list(zip(batch.column("key").to_pylist(),
                                   batch.column("value").to_pylist()))[:limit]:
            yield key, value, str(path)


def _coordinator_seeds() -> Iterator[bytes]:
    for topic, txn in (("__consumer_offsets", False), ("__transaction_state", True)):
        for key, value, _ in _fixture_records(topic, 20):
            if key:
                yield bytes([2 if txn else 0]) + key
            if value:
                yield (bytes([3]) + value if txn else bytes([1]) + key[:2] + value)


def _internal_seeds() -> Iterator[bytes]:
    """Remote-log-metadata values of every record type (built from Kafka's schemas by the
    tests' independent builder), the fixtures' ``__cluster_metadata`` values, and a
    share-group key/value pair."""
    import sys

    sys.path.insert(0, str(REPO))
    from tests.format import remote_log_metadata_builders as rlm

    for value in (rlm.segment(), rlm.update(), rlm.partition_delete(), rlm.snapshot()):
        yield b"\x00" + value
    for _, value, _ in _fixture_records("__cluster_metadata", 40):
        if value:
            yield b"\x01" + value
    key = struct.pack(">h", 0) + struct.pack(">h", 1) + b"g" + bytes(16) + struct.pack(">i", 0)
    yield b"\x02" + bytes([len(key)]) + key + struct.pack(">h", 0) + bytes(32)


def seeds(name: str) -> Iterator[bytes]:
    """Starting inputs of target ``name`` (flags byte included)."""
    if name in ("decode_buffer", "scan_buffer", "decode_segments"):
        for batch in _batches():
            for flags in (0x01, 0x07, 0x4d) if name != "decode_segments" else (0x01, 0x40):
                yield bytes([flags]) + batch
    elif name in ("offset_index", "time_index", "txn_index", "producer_snapshot"):
        suffix = {"offset_index": ".index", "time_index": ".timeindex",
                  "txn_index": ".txnindex", "producer_snapshot": ".snapshot"}[name]
        for data in _prefixes(suffix, size=4096 if name != "producer_snapshot" else MAX_LEN):
            yield b"\x01" + data
            yield b"\x00" + data
        if name == "txn_index":        # the fixtures' .txnindex files are all empty
            from spark_kafkalog.log.files.txn import encode_txn_index

            yield b"\x00" + encode_txn_index([(7, 10, 20, 10), (8, 15, 30, 15), (7, 40, 41, 40)])
    elif name == "checkpoint":
        for data in _prefixes("replication-offset-checkpoint", "recovery-point-offset-checkpoint",
                              "log-start-offset-checkpoint", "cleaner-offset-checkpoint"):
            yield b"\x00" + data
        for data in _prefixes("leader-epoch-checkpoint"):
            yield b"\x01" + data
    elif name == "journal":
        raw = _journal_seed()
        yield b"\x00" + raw
        yield b"\x01" + raw[raw.find(b"\n") + 1:]
    elif name == "coordinator_record":
        yield from _coordinator_seeds()
    elif name == "internal_record":
        yield from _internal_seeds()
    elif name == "avro_values":
        yield from _avro_seeds()
    else:
        raise KeyError(name)

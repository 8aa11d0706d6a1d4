"""The record-batch half of ``kafkalog dump``: a segment (``.log``, KRaft ``.checkpoint``)
batch by batch and, with ``records``, record by record, in the text of Kafka's
DumpLogSegments; plus the :class:`DumpLine` and :class:`DumpOptions` of every dump.

Read in bounded windows through :func:`~spark_kafkalog.log.read.scan.scan_windows`; records
are decoded a group of batches at a time.
"""
from __future__ import annotations

import posixpath
import struct
import warnings
import zlib
from dataclasses import dataclass, field
from typing import Iterator

import crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from spark_kafkalog.errors import InvalidOptionError, KafkaLogError, LogLayoutError
from spark_kafkalog.format import decode_run, decompress
from spark_kafkalog.format._text import dump_records, java_string
from spark_kafkalog.format.coordinator import offsets_text, transaction_log_text
from spark_kafkalog.format.coordinator.share import share_group_state_text
from spark_kafkalog.format.cluster_metadata import cluster_metadata_text
from spark_kafkalog.format.decode import decode_varint, decode_varlong
from spark_kafkalog.format.kraft_control import KRAFT_CONTROL_TYPES, control_text
from spark_kafkalog.format.wire import (
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    CODEC_NAMES,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_TYPE_NAMES,
    LEGACY_MAGIC_POS,
    LEGACY_TIMESTAMP_TYPE,
    V2_ATTRIBUTES_POS,
    V2_RECORDS_POS,
)
from spark_kafkalog.log.diagnose.dump_legacy import legacy_inner_crcs
from spark_kafkalog.log.model import PartitionDir, Segment
from spark_kafkalog.log.read.scan import (
    DEFAULT_WINDOW_BYTES,
    ReadStats,
    TornTailWarning,
    scan_windows,
)

__all__ = ["DumpLine", "DumpOptions", "dump_segment", "dump_line", "dump_note", "dump_problem",
           "base_offset_of", "file_size", "INT32_MAX"]

INT32_MAX = 0x7FFFFFFF
def _remote_log_metadata_text(key: bytes | None, value: bytes | None, offset: int):
    """Kafka's RemoteMetadataLogMessageParser: no key, the record as its payload (a value
    that does not decode: Kafka's "Error at offset N, skipping." line)."""
    from spark_kafkalog.format.remote_log_metadata import dump_text

    return None, dump_text(key, value, offset)


#: DumpOptions.decoder -> (key, value, offset) -> (key text, payload text)
DECODERS = {"offsets": offsets_text, "transaction-log": transaction_log_text,
            "remote-log-metadata": _remote_log_metadata_text,
            "share-group-state": share_group_state_text,
            "cluster-metadata": cluster_metadata_text}
#: Kafka's decoders kafkalog dump does not have yet (refused by name)
NOT_YET = ()


@dataclass(frozen=True)
class DumpOptions:
    """``records``: every record of every batch (Kafka's ``--deep-iteration``);
    ``print_data``: keys and values too (implies ``records``, as in Kafka);
    ``verify_crc``: a checksum mismatch is a problem; ``max_bytes``: only the batches
    that end within the first ``max_bytes`` bytes of a segment (Kafka's ``--max-bytes``);
    ``decoder``: ``"offsets"`` or ``"transaction-log"`` prints keys and values decoded
    as ``__consumer_offsets`` / ``__transaction_state`` records (Kafka's
    ``--offsets-decoder`` / ``--transaction-log-decoder``; implies ``print_data``)."""

    records: bool = False
    print_data: bool = False
    verify_crc: bool = False
    max_bytes: int | None = None
    window_bytes: int = DEFAULT_WINDOW_BYTES
    decoder: str | None = None
    #: only text is wanted (no ``fields``): records come as "block" lines, formatted
    #: compiled a batch at a time, their bytes in ``fields["data"]``
    text_only: bool = False
    #: ``--skip-record-metadata``: record lines hold only ``|`` and the data; control
    #: records are not shown
    skip_metadata: bool = False
    #: ``--max-message-size``: bytes Kafka's tool reads at an offset index entry's position
    #: to find its batch (with the log overhead). An entry whose batch is larger ends the
    #: dump of the index with a problem whose ``fields["fatal"]`` is True (Kafka's tool
    #: dies there, and ``kafkalog dump`` stops there too); None: no limit. Segments are
    #: read whatever their batches' size, as Kafka's tool reads them
    max_message_size: int | None = None
    #: indexes: None (print entries), "sanity" (``--index-sanity-check``: only say whether
    #: the index passes) or "verify" (``--verify-index-only``: only its mismatches)
    index_mode: str | None = None

    def __post_init__(self):
        if self.decoder in NOT_YET:
            raise InvalidOptionError(f"--{self.decoder}-decoder: not implemented yet in "
                                     "kafkalog dump")
        if self.decoder is not None and self.decoder not in DECODERS:
            raise InvalidOptionError(f"decoder {self.decoder!r}: expected one of "
                                     f"{', '.join(sorted(DECODERS))}")
        if self.decoder is not None:
            object.__setattr__(self, "print_data", True)
        if self.print_data and not self.records:
            object.__setattr__(self, "records", True)


@dataclass(frozen=True)
class DumpLine:
    """One thing :func:`dump_file` has to say.

    ``kind``: ``"line"`` (the dump itself, Kafka's text in ``text``), ``"note"``
    (worth saying, not damage; Kafka prints these to stderr) or ``"problem"`` (damage:
    ``fields`` has ``path``, ``position``, ``offset``, ``message``). ``fields``: the same
    content as data, with ``type`` naming what it is; record keys and values are
    ``bytes`` (``key``, ``payload``), exactly as stored."""

    kind: str
    text: str
    fields: dict = field(default_factory=dict)


def dump_line(text: str, fields: dict) -> DumpLine:
    return DumpLine("line", text, fields)


def dump_note(text: str, fields: dict | None = None) -> DumpLine:
    return DumpLine("note", text, {"type": "note", "message": text, **(fields or {})})


def dump_problem(path: str, position: int | None, offset: int | None,
                 message: str) -> DumpLine:
    return DumpLine("problem", message, {"type": "problem", "path": path,
                                         "position": position, "offset": offset,
                                         "message": message})


def base_offset_of(name: str) -> int:
    """The base offset in a segment-style file name (``00000000000000000042.log``); 0
    for names without one (KRaft bootstrap.checkpoint)."""
    digits = name.split(".", 1)[0].split("-", 1)[0]
    return int(digits) if digits.isdigit() else 0


def file_size(fs, path: str) -> int | None:
    info = fs.get_file_info(path)
    return None if info.type == pafs.FileType.NotFound else int(info.size or 0)


def _increment_sequence(seq: int, delta: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: sequences wrap at Integer.MAX_VALUE."""
    if seq > INT32_MAX - delta:
        return delta - (INT32_MAX - seq) - 1
    return seq + delta


def _timestamp_type(magic: int, attributes: int) -> str:
    if magic == 0:
        return "NoTimestampType"
    bit = ATTR_TIMESTAMP_TYPE if magic == 2 else LEGACY_TIMESTAMP_TYPE
    return "LogAppendTime" if attributes & bit else "CreateTime"


def _batch_valid(view: memoryview, magic: int, stored_crc: int) -> bool:
    """Whether the stored checksum matches: CRC-32C of [attributes, end) for v2, CRC-32
    of [magic, end) for a legacy message."""
    if magic == 2:
        return crc32c.crc32c(view[V2_ATTRIBUTES_POS:]) == stored_crc
    return (zlib.crc32(view[LEGACY_MAGIC_POS:]) & 0xFFFFFFFF) == stored_crc


def _control_records(view: memoryview, codec: int, count: int):
    """Records of a v2 control batch as ``(offset delta, timestamp delta, key, value,
    header keys)``, walked within the batch's bytes (decompressed first if needed).
    Raises KafkaLogError on bytes that do not hold ``count`` records."""
    payload = view[V2_RECORDS_POS:]
    data = bytes(decompress(codec, payload)) if codec else bytes(payload)
    out = []
    q = 0
    for _ in range(max(count, 0)):
        length, q = decode_varint(data, q)
        end = q + length
        if length < 0 or end > len(data):
            raise LogLayoutError(f"control record of {length} bytes runs past its batch")
        q += 1                                               # attributes
        ts_delta, q = decode_varlong(data, q)
        off_delta, q = decode_varint(data, q)
        klen, q = decode_varint(data, q)
        key = data[q:q + klen] if klen >= 0 else None
        q += max(klen, 0)
        vlen, q = decode_varint(data, q)
        value = data[q:q + vlen] if vlen >= 0 else None
        q += max(vlen, 0)
        hcount, q = decode_varint(data, q)
        hkeys = []
        for _h in range(max(hcount, 0)):
            hk, q = decode_varint(data, q)
            hkeys.append(data[q:q + max(hk, 0)].decode("utf-8", "replace"))
            q += max(hk, 0)
            hv, q = decode_varint(data, q)
            q += max(hv, 0)
        if q > end:
            raise LogLayoutError("control record fields run past the record's length")
        out.append((off_delta, ts_delta, key, value, hkeys))
        q = end
    return out


def _describe_control(key: bytes | None, value: bytes | None) -> tuple[str, dict]:
    if key is None or len(key) < 4:
        return " controlType: unreadable", {"controlType": None}
    ctype = struct.unpack_from(">h", key, 2)[0]
    if ctype in (CONTROL_ABORT, CONTROL_COMMIT) and value is not None and len(value) >= 6:
        epoch = struct.unpack_from(">i", value, 2)[0]
        name = CONTROL_TYPE_NAMES[ctype]
        return (f" endTxnMarker: {name} coordinatorEpoch: {epoch}",
                {"endTxnMarker": name, "coordinatorEpoch": epoch})
    if ctype in KRAFT_CONTROL_TYPES and value is not None:
        try:
            text = control_text(ctype, value)
        except KafkaLogError:
            text = None
        if text is not None:
            return " " + text, {"controlType": KRAFT_CONTROL_TYPES[ctype][1],
                                "controlTypeId": ctype, "decoded": text}
    name = CONTROL_TYPE_NAMES.get(ctype, "UNKNOWN")
    return f" controlType: {name}({ctype})", {"controlType": name, "controlTypeId": ctype}


def _text(data: bytes | None) -> str:
    """Bytes as Kafka's StringDecoder (Java's ``new String(bytes, UTF_8)``) shows them."""
    if data is None:
        return ""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return java_string(bytes(data))


def _dump_control_records(path: str, view: memoryview, h: dict) -> Iterator[DumpLine]:
    base, pos = h["base_offset"], h["position"]
    ttype = _timestamp_type(h["magic"], h["attributes"])
    try:
        recs = _control_records(view, h["codec"], h["record_count"])
    except KafkaLogError as e:
        yield dump_problem(path, pos, base, f"control batch records do not decode: {e.reason}")
        return
    for off_delta, ts_delta, key, value, hkeys in recs:
        ts = h["max_timestamp"] if ttype == "LogAppendTime" else h["first_timestamp"] + ts_delta
        seq = -1 if h["base_sequence"] < 0 else _increment_sequence(h["base_sequence"],
                                                                    off_delta)
        text, extra = _describe_control(key, value)
        ksize = -1 if key is None else len(key)
        vsize = -1 if value is None else len(value)
        yield dump_line(f"| offset: {base + off_delta} {ttype}: {ts} keySize: {ksize} "
               f"valueSize: {vsize} sequence: {seq} headerKeys: [{','.join(hkeys)}]" + text,
               {"type": "record", "offset": base + off_delta, "timestampType": ttype,
                "timestamp": ts, "keySize": ksize, "valueSize": vsize, "sequence": seq,
                "headerKeys": hkeys, "control": True, **extra})


class _Rows:
    """Decoded data records of a run of batches; ``take`` hands out the rows of one batch
    after another. Python lists of the columns are made only when asked for (the JSON
    output and the decoders print per record; the text output is formatted compiled)."""

    def __init__(self, rb: pa.RecordBatch, print_data: bool):
        self.rb = rb
        self.print_data = print_data
        self._offsets = rb.column("offset").to_numpy()
        self.at = 0

    def __len__(self) -> int:
        return len(self._offsets)

    def __getattr__(self, name):
        rb = self.rb
        if name == "offsets":
            value = self._offsets.tolist()
        elif name == "stamps":
            value = rb.column("timestamp").cast(pa.int64()).to_pylist()
        elif name == "key_sizes":
            value = pc.binary_length(rb.column("key")).to_pylist()
        elif name == "value_sizes":
            value = pc.binary_length(rb.column("value")).to_pylist()
        elif name == "headers":
            value = rb.column("headers").to_pylist()
        elif name in ("keys", "values"):
            col = rb.column("key" if name == "keys" else "value")
            value = col.to_pylist() if self.print_data else None
        else:
            raise AttributeError(name)
        setattr(self, name, value)
        return value

    def legacy_view(self, h: dict):
        """The bytes of the legacy batch ``h`` (set by the caller), or None."""
        return self.entries.get(h["position"]) if hasattr(self, "entries") else None

    def take(self, last_offset: int) -> range:
        """Indexes of the rows up to ``last_offset`` (the next batch's records)."""
        start = self.at
        k = int(np.searchsorted(self._offsets, last_offset, side="right"))
        self.at = k = max(k, start)
        return range(start, k)


def _decode_rows(view: memoryview, *, verify_crc: bool, position: int, print_data: bool
                 ) -> _Rows:
    return _Rows(decode_run(view, verify_crc=verify_crc, include_headers=True,
                            position_base=position), print_data)


def _print_rows(path: str, h: dict, valid: bool, rows: _Rows, idx: range,
                opts: DumpOptions) -> Iterator[DumpLine]:
    magic, base = h["magic"], h["base_offset"]
    ttype = _timestamp_type(magic, h["attributes"])
    legacy_crc = magic < 2 and h["codec"] == 0      # the batch is the message itself
    if opts.text_only and opts.decoder is None:
        if len(idx) and magic < 2 and h["codec"] != 0 and not opts.skip_metadata:
            # a compressed legacy wrapper: each inner message shows its own CRC
            inner = legacy_inner_crcs(len(idx), rows.legacy_view(h), h["codec"], magic)
            for i, (crc, ok) in zip(idx, inner):
                yield DumpLine("block", "", {"data": dump_records(
                    rows.rb, i, i + 1, ttype.encode(), magic, base, -1, True, ok, crc,
                    opts.print_data)})
        elif len(idx):
            yield DumpLine("block", "", {"data": dump_records(
                rows.rb, idx.start, idx.stop, ttype.encode(), magic, base,
                h["base_sequence"], legacy_crc, valid, h["crc"], opts.print_data,
                opts.skip_metadata)})
        return
    for i in idx:
        off, ts = rows.offsets[i], rows.stamps[i]
        ts_ms = -1 if ts is None else ts // 1000
        ksize = rows.key_sizes[i]
        vsize = rows.value_sizes[i]
        ksize = -1 if ksize is None else ksize
        vsize = -1 if vsize is None else vsize
        obj = {"type": "record", "offset": off, "timestampType": ttype, "timestamp": ts_ms,
               "keySize": ksize, "valueSize": vsize}
        text = f"| offset: {off} {ttype}: {ts_ms} keySize: {ksize} valueSize: {vsize}"
        if magic == 2:
            seq = -1 if h["base_sequence"] < 0 else _increment_sequence(h["base_sequence"],
                                                                        off - base)
            hdrs = rows.headers[i]
            hkeys = [x["key"] for x in hdrs] if hdrs else []
            text += f" sequence: {seq} headerKeys: [{','.join(hkeys)}]"
            obj.update(sequence=seq, headerKeys=hkeys)
        elif legacy_crc:
            text += f" isValid: {str(valid).lower()} crc: {h['crc']}"
            obj.update(isValid=valid, crc=h["crc"])
        if opts.skip_metadata:
            # Kafka's tool: no metadata, the contents (decoded by the decoder, if any)
            # after "| "; a record with neither key nor payload text is an empty line
            text, obj = "", {"type": "record", "offset": off}
        ktext = ptext = None
        if opts.decoder is not None:
            key, value = rows.keys[i], rows.values[i]
            try:
                ktext, ptext = DECODERS[opts.decoder](key, value, off)
            except KafkaLogError as e:
                yield dump_line(text, obj)
                yield dump_problem(path, h["position"], off, e.reason)
                continue
            obj.update(key=key, payload=value, decodedKey=ktext, decodedPayload=ptext)
        elif opts.print_data:
            key, value = rows.keys[i], rows.values[i]
            ktext = None if key is None else _text(key)
            ptext = None if value is None else _text(value)
            obj.update(key=key, payload=value)
        contents = ([f"key: {ktext}"] if ktext is not None else []) \
            + ([f"payload: {ptext}"] if ptext is not None else [])
        if contents:
            text += ("| " if opts.skip_metadata else " ") + " ".join(contents)
        yield dump_line(text, obj)


def _dump_batch_records(path: str, view: memoryview, h: dict, valid: bool,
                        opts: DumpOptions) -> Iterator[DumpLine]:
    """Records of one batch on its own (after its group failed to decode as a whole):
    a batch that does not decode is a problem at its position."""
    if h["magic"] == 2 and h["record_count"] == 0:
        return
    try:
        # a mismatch of the batch's own checksum is reported once, by the caller; what
        # is left to check here are the inner messages of a compressed legacy wrapper
        rows = _decode_rows(view, verify_crc=opts.verify_crc and valid,
                            position=h["position"], print_data=opts.print_data)
        rows.entries = {h["position"]: view}
    except KafkaLogError as e:
        yield dump_problem(path, e.position if e.position is not None else h["position"],
                  e.offset if e.offset is not None else h["base_offset"],
                  f"records do not decode: {e.reason}")
        return
    yield from _print_rows(path, h, valid, rows, range(len(rows)), opts)


_HEADER_COLUMNS = ("position", "size", "magic", "attributes", "codec", "base_offset",
                   "last_offset", "first_timestamp", "max_timestamp", "producer_id",
                   "producer_epoch", "base_sequence", "record_count",
                   "partition_leader_epoch", "is_transactional", "is_control", "crc")


def _dump_batch_line(h: dict, valid: bool) -> Iterator[DumpLine]:
    magic = h["magic"]
    ttype = _timestamp_type(magic, h["attributes"])
    codec = CODEC_NAMES.get(h["codec"], f"codec-{h['codec']}")
    obj = {"type": "batch", "baseOffset": h["base_offset"], "lastOffset": h["last_offset"],
           "position": h["position"], "timestampType": ttype,
           "maxTimestamp": h["max_timestamp"], "size": h["size"], "magic": magic,
           "compresscodec": codec, "crc": h["crc"], "isvalid": valid}
    if magic == 2:
        last_seq = -1 if h["base_sequence"] < 0 else _increment_sequence(
            h["base_sequence"], h["last_offset"] - h["base_offset"])
        horizon = h["first_timestamp"] if h["attributes"] & ATTR_DELETE_HORIZON else None
        horizon_text = "OptionalLong.empty" if horizon is None else f"OptionalLong[{horizon}]"
        text = (f"baseOffset: {h['base_offset']} lastOffset: {h['last_offset']} "
                f"count: {h['record_count']} baseSequence: {h['base_sequence']} "
                f"lastSequence: {last_seq} producerId: {h['producer_id']} "
                f"producerEpoch: {h['producer_epoch']} "
                f"partitionLeaderEpoch: {h['partition_leader_epoch']} "
                f"isTransactional: {str(h['is_transactional']).lower()} "
                f"isControl: {str(h['is_control']).lower()} deleteHorizonMs: {horizon_text}")
        obj.update(count=h["record_count"], baseSequence=h["base_sequence"],
                   lastSequence=last_seq, producerId=h["producer_id"],
                   producerEpoch=h["producer_epoch"],
                   partitionLeaderEpoch=h["partition_leader_epoch"],
                   isTransactional=h["is_transactional"], isControl=h["is_control"],
                   deleteHorizonMs=horizon)
    else:
        # a legacy entry shows its own offset (a compressed wrapper's is its last inner one)
        text = f"offset: {h['last_offset']}"
    text += (f" position: {h['position']} {ttype}: {h['max_timestamp']} size: {h['size']} "
             f"magic: {magic} compresscodec: {codec} crc: {h['crc']} "
             f"isvalid: {str(valid).lower()}")
    yield dump_line(text, obj)


#: records are decoded for groups of whole batches of about this many bytes at a time
#: (one kernel call per group, not per batch; decoded rows of one group in memory)
_DECODE_GROUP_BYTES = 1 << 20


def _dump_window(path: str, w, opts: DumpOptions) -> Iterator[DumpLine]:
    cols = {c: w.headers[c].tolist() for c in _HEADER_COLUMNS}
    n = len(w.headers)
    hs = [{c: cols[c][r] for c in _HEADER_COLUMNS} for r in range(n)]
    r = 0
    while r < n:
        end, size = r, 0
        while end < n and (end == r or size < _DECODE_GROUP_BYTES):
            size += hs[end]["size"]
            end += 1
        yield from _dump_group(path, w, hs[r:end], opts)
        r = end


def _dump_group(path: str, w, hs: list[dict], opts: DumpOptions) -> Iterator[DumpLine]:
    views, valid = [], []
    for h in hs:
        start = h["position"] - w.position
        view = w.data[start:start + h["size"]]
        views.append(view)
        valid.append(_batch_valid(view, h["magic"], h["crc"]))
    rows = None
    if opts.records:
        lo = hs[0]["position"] - w.position
        hi = hs[-1]["position"] + hs[-1]["size"] - w.position
        try:
            rows = _decode_rows(w.data[lo:hi], verify_crc=opts.verify_crc and all(valid),
                                position=hs[0]["position"], print_data=opts.print_data)
            rows.entries = {h["position"]: v for h, v in zip(hs, views) if h["magic"] < 2}
        except KafkaLogError:
            rows = None         # decode batch by batch below, to say which one is bad
    for h, view, ok in zip(hs, views, valid):
        yield from _dump_batch_line(h, ok)
        if not ok and opts.verify_crc:
            yield dump_problem(path, h["position"], h["base_offset"],
                      f"checksum mismatch: stored {h['crc']}")
        if not opts.records:
            continue
        if h["magic"] == 2 and h["is_control"]:
            if not opts.skip_metadata:
                yield from _dump_control_records(path, view, h)
            else:           # Kafka prints an empty line for each control record
                for _ in range(max(h["record_count"], 0)):
                    yield dump_line("", {"type": "record", "control": True})
        elif rows is not None:
            yield from _print_rows(path, h, ok, rows, rows.take(h["last_offset"]), opts)
        else:
            yield from _dump_batch_records(path, view, h, ok, opts)


def dump_segment(fs: pafs.FileSystem, path: str, opts: DumpOptions) -> Iterator[DumpLine]:
    name = posixpath.basename(path)
    size = file_size(fs, path)
    if size is None:
        raise LogLayoutError("no such file", path=path)
    base = base_offset_of(name)
    if name.endswith(".checkpoint"):
        # a KRaft snapshot (<end offset>-<epoch>.checkpoint) or bootstrap.checkpoint: its
        # batches are numbered from 0, whatever the name says
        stem = name[:-len(".checkpoint")]
        end, _, epoch = stem.partition("-")
        if end.isdigit() and epoch.isdigit():
            yield dump_line(f"Snapshot end offset: {int(end)}, epoch: {int(epoch)}",
                   {"type": "file", "path": path, "kind": "snapshot",
                    "endOffset": int(end), "epoch": int(epoch)})
        else:
            yield dump_line("KRaft bootstrap snapshot" if stem == "bootstrap" else f"Snapshot {name}",
                   {"type": "file", "path": path, "kind": "snapshot"})
        base = 0
    else:
        yield dump_line(f"Log starting offset: {base}",
               {"type": "file", "path": path, "kind": "log", "baseOffset": base})
    # --max-bytes: the file as if it ended there; the batch cut by the limit is not shown
    limit = size if opts.max_bytes is None else min(size, max(opts.max_bytes, 0))
    seg = Segment(base, path, limit, None, None, None)
    p = PartitionDir("", 0, "", posixpath.dirname(path), (seg,))
    stats = ReadStats()
    reported = 0

    def skipped(before: int | None) -> list[DumpLine]:
        nonlocal reported
        found = []
        while reported < len(stats.skipped) and (
                before is None or stats.skipped[reported].start < before):
            s = stats.skipped[reported]
            # garbage "claims" an offset too: only show one a batch of this file could have
            offset = s.offset if s.offset is not None and \
                base <= s.offset < base + (1 << 31) else None
            found.append(dump_problem(path, s.start, offset, f"{s.reason}; skipped "
                                  f"{s.end - s.start} bytes up to position {s.end}"))
            reported += 1
        return found

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornTailWarning)
        # CRCs are not checked by the scan: a batch whose checksum does not match is
        # still shown, with isvalid: false (as DumpLogSegments does); --max-message-size
        # does not bound a segment's batches (Kafka's tool reads them whatever their size)
        for w in scan_windows(fs, p, on_corruption="skip", stats=stats, verify_crc=False,
                              quiet=True, window_bytes=opts.window_bytes):
            yield from skipped(w.position)
            yield from _dump_window(path, w, opts)
    if limit < size:
        yield from skipped(stats.torn_tail[1] if stats.torn_tail is not None else None)
        yield dump_note(f"Stopped at --max-bytes {limit} of {size} bytes",
                    {"path": path, "maxBytes": limit, "size": size})
        return
    yield from skipped(None)
    if stats.torn_tail is not None:
        _p, where, nbytes = stats.torn_tail
        yield dump_line(f"Found {nbytes} invalid bytes at the end of {name}",
                        {"type": "invalid_bytes", "path": path, "position": where,
                         "bytes": nbytes})
        yield dump_note(f"  (position {where}: a torn batch or zero padding, which broker "
                        "recovery truncates)", {"path": path, "position": where,
                                                 "bytes": nbytes})

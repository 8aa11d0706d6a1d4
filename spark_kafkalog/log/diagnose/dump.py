"""The byte parsing behind ``kafkalog dump``: what Kafka's DumpLogSegments prints, for
segments (``.log``, KRaft ``.checkpoint``; :mod:`.dump_segment`), ``.index``,
``.timeindex``, ``.txnindex``, producer ``.snapshot`` files and checkpoint files.

:func:`dump_file` yields :class:`DumpLine` records (a line of output, a note, or a problem
with its file, position and offset); it prints nothing. Index files are read in bounded
chunks and segments in bounded windows: no file is read into memory whole.
"""
from __future__ import annotations

import posixpath
import struct
from typing import Callable, Iterator

import pyarrow.fs as pafs

from spark_kafkalog.errors import InvalidOptionError, KafkaLogError, LogLayoutError
from spark_kafkalog.format.wire import (
    HEADER_PEEK,
    LOG_OVERHEAD,
    MAGIC_POS,
    V2_LAST_OFFSET_DELTA_POS,
)
from spark_kafkalog.log.files.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    parse_checkpoint,
    parse_leader_epoch_checkpoint,
)
from spark_kafkalog.log.diagnose.dump_segment import (
    INT32_MAX,
    DumpLine,
    DumpOptions,
    base_offset_of,
    dump_line,
    dump_note,
    dump_problem,
    dump_segment,
    file_size,
)
from spark_kafkalog.log.io import read_small_file, split_deleted
from spark_kafkalog.log.files.index import OFFSET_INDEX_ENTRY, TIME_INDEX_ENTRY
from spark_kafkalog.log.files.txn import (
    ABORTED_TXN,
    SNAPSHOT_ENTRY,
    SNAPSHOT_HEADER,
    TXN_INDEX_VERSION,
    parse_producer_snapshot,
)

__all__ = ["DumpLine", "DumpOptions", "FILE_KINDS", "dump_file", "file_kind"]

_OFFSET_CHECKPOINTS = (REPLICATION_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
                       LOG_START_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT)
#: a compaction's files before their swap (renamed-for-deletion names: split_deleted)
_LEFTOVER_SUFFIXES = (".cleaned", ".swap")
#: index entries read per chunk (bounded memory for 10 MiB index files)
_INDEX_CHUNK_ENTRIES = 1 << 16
#: files read whole (checkpoints, producer snapshots, txn indexes)
_SMALL_FILE_LIMIT = 256 * 1024 * 1024
#: what :func:`file_kind` recognises, for messages
FILE_KINDS = (".log, .index, .timeindex, .txnindex, .snapshot, KRaft .checkpoint or "
              "checkpoint file")


def file_kind(name: str) -> str | None:
    """What a file is by its name (``log``, ``index``, ...), None when dump does not know
    it (Kafka's tool skips such files)."""
    base = split_deleted(name)[0]
    for suffix in _LEFTOVER_SUFFIXES:
        if base.endswith(suffix):
            base = base[:-len(suffix)]
    if base in _OFFSET_CHECKPOINTS:
        return "offset-checkpoint"
    if base == LEADER_EPOCH_CHECKPOINT:
        return "leader-epoch-checkpoint"
    for ext, kind in ((".log", "log"), (".checkpoint", "log"), (".index", "index"),
                      (".timeindex", "timeindex"), (".txnindex", "txnindex"),
                      (".snapshot", "snapshot")):
        if base.endswith(ext):
            return kind
    return None


def dump_file(fs: pafs.FileSystem, path: str, options: DumpOptions | None = None
              ) -> Iterator[DumpLine]:
    """What ``kafkalog dump`` shows for the file at ``path`` on ``fs``, line by line.

    Raises InvalidOptionError for a file of a kind :func:`file_kind` does not know,
    LogLayoutError for a missing one; damage inside the file is yielded as problems."""
    kind = file_kind(posixpath.basename(path))
    if kind is None:
        raise InvalidOptionError(f"cannot dump {posixpath.basename(path)!r}: expected a "
                                 f"{FILE_KINDS}")
    options = options or DumpOptions()
    if kind in ("index", "timeindex") and options.index_mode is not None:
        return _index_mode(fs, path, kind, options)
    return _DUMPERS[kind](fs, path, options)


def _index_mode(fs, path: str, kind: str, opts: DumpOptions) -> Iterator[DumpLine]:
    """``--index-sanity-check`` (only "FILE passed sanity check.", or the problems) and
    ``--verify-index-only`` (entries not printed; mismatches and problems are)."""
    found = []
    empty = False
    for item in _DUMPERS[kind](fs, path, opts):
        if item.kind == "line" and item.text.endswith(" is empty."):
            empty = True
            yield item
        elif item.kind == "problem":
            found.append(item)
        elif item.kind == "note" and opts.index_mode == "verify":
            yield item
    if opts.index_mode == "sanity" and not empty and not found:
        yield dump_line(f"{path} passed sanity check.", {"type": "sanity", "path": path,
                                                          "passed": True})
    yield from found


def _size_of(fs, path: str) -> int:
    """The size of a file to dump; a missing one raises (as :func:`dump_file` says)."""
    size = file_size(fs, path)
    if size is None:
        raise LogLayoutError("no such file", path=path)
    return size


def _sibling(path: str, name: str) -> str:
    return posixpath.join(posixpath.dirname(path), name)


# ---- dump: index files ---------------------------------------------------------------------

def _peek_batch(f, log_size: int, position: int) -> tuple[int, int, int, int] | None:
    """``(magic, first offset or -1, last offset, size with the log overhead)`` of the
    batch the 27 bytes at ``position`` describe, or None when no plausible batch starts
    there."""
    if position < 0 or position + HEADER_PEEK > log_size:
        return None
    raw = f.read_at(min(V2_LAST_OFFSET_DELTA_POS + 4, log_size - position), position)
    if len(raw) < HEADER_PEEK:
        return None
    offset, length = struct.unpack_from(">qi", raw, 0)
    magic = raw[MAGIC_POS]
    if magic > 2 or length < 0 or position + LOG_OVERHEAD + length > log_size:
        return None
    if magic == 2:
        if len(raw) < V2_LAST_OFFSET_DELTA_POS + 4:
            return None
        delta = struct.unpack_from(">i", raw, V2_LAST_OFFSET_DELTA_POS)[0]
        return magic, offset, offset + delta, LOG_OVERHEAD + length
    return magic, -1, offset, LOG_OVERHEAD + length


def _iter_entries(fs, path: str, entry: struct.Struct):
    """``(k, fields)`` for each whole entry of an index file, read in bounded chunks."""
    with fs.open_input_file(path) as f:
        size = f.size()
        n = size // entry.size
        k = 0
        while k < n:
            m = min(_INDEX_CHUNK_ENTRIES, n - k)
            chunk = f.read_at(m * entry.size, k * entry.size)
            for j, fields in enumerate(entry.iter_unpack(chunk[:len(chunk) - len(chunk) % entry.size])):
                yield k + j, fields
            k += m


def _dump_offset_index(fs, path: str, opts: DumpOptions) -> Iterator[DumpLine]:
    name = posixpath.basename(path)
    base = base_offset_of(name)
    size = _size_of(fs, path)
    # the segment's .log renamed with the index, by the same suffix (log.io.deleted)
    log_path = _sibling(path, f"{name.split('.', 1)[0]}.log{split_deleted(name)[1]}")
    log_size = file_size(fs, log_path)
    if log_size is None:
        yield dump_note(f"no {posixpath.basename(log_path)} next to the index: entries are not "
               "checked against the log")
    if size % OFFSET_INDEX_ENTRY.size:
        yield dump_note(f"{size % OFFSET_INDEX_ENTRY.size} trailing bytes after the last whole entry "
               "(ignored, as Kafka does)")
    logf = fs.open_input_file(log_path) if log_size is not None else None
    # --index-sanity-check reads no entry's batch (Kafka's tool checks the index file only)
    limit = None if opts.index_mode == "sanity" else opts.max_message_size
    count = 0
    mismatches = []
    prev = None
    try:
        for k, (rel, position) in _iter_entries(fs, path, OFFSET_INDEX_ENTRY):
            if k > 0 and rel == 0:
                break               # the zero-filled tail of a preallocated index
            offset = base + rel
            where = k * OFFSET_INDEX_ENTRY.size
            batch = None if logf is None else _peek_batch(logf, log_size, position)
            if batch is not None and limit is not None and batch[3] > limit:
                # Kafka's tool reads the batch of each entry from a slice of
                # --max-message-size bytes at its position, before it prints the entry:
                # a larger batch is not in the slice, and the tool dies there
                # (NoSuchElementException, exit 1), printing nothing more of any file
                problem = dump_problem(
                    path, where, offset, f"entry {k} points to a batch of {batch[3]} bytes "
                    f"at position {position}, more than --max-message-size {limit}: "
                    "Kafka's kafka-dump-log stops here (NoSuchElementException), and so "
                    "does this dump; raise --max-message-size to read on")
                problem.fields["fatal"] = True
                yield problem
                return
            count += 1
            yield dump_line(f"offset: {offset} position: {position}",
                   {"type": "index_entry", "entry": k, "offset": offset, "position": position})
            if prev is not None and (offset <= prev[0] or position <= prev[1]):
                yield dump_problem(path, where, offset, f"entry {k} ({offset}, {position}) does not "
                          f"increase after ({prev[0]}, {prev[1]})")
            prev = (offset, position)
            if logf is None:
                continue
            if batch is None:
                yield dump_problem(path, where, offset,
                          f"entry {k} points to position {position}, where no batch of "
                          f"{posixpath.basename(log_path)} ({log_size} bytes) starts")
            elif batch[1] > offset:
                yield dump_problem(path, where, offset,
                          f"entry {k} maps offset {offset} to a batch starting at offset "
                          f"{batch[1]}: readers seeking {offset} would miss records")
            elif batch[2] != offset:
                mismatches.append((offset, batch[2]))
    finally:
        if logf is not None:
            logf.close()
    if size < OFFSET_INDEX_ENTRY.size:
        yield dump_line(f"{path} is empty.", {"type": "index_empty", "path": path})
    elif count == 0:
        yield dump_note(f"{path} is empty.")
    if mismatches:
        # what DumpLogSegments lists: an append of several batches (a follower's, or a
        # legacy producer's message set) is indexed with its largest offset, so these
        # are not damage by themselves
        yield dump_note(f"Mismatches in :{path} (index offset vs last offset of the batch there; "
               "normal for multi-batch appends)")
        for idx_off, log_off in mismatches:
            yield dump_note(f"  Index offset: {idx_off}, log offset: {log_off}",
                   {"indexOffset": idx_off, "logOffset": log_off})


# Not one dumper with _dump_offset_index: the layouts, the order rules (offsets may repeat
# here) and what Kafka's tool prints (a preallocated file's first zero slot) differ.
def _dump_time_index(fs, path: str, opts: DumpOptions) -> Iterator[DumpLine]:
    name = posixpath.basename(path)
    base = base_offset_of(name)
    size = _size_of(fs, path)
    n_file = size // TIME_INDEX_ENTRY.size
    count = 0
    prev = None
    for k, (ts, rel) in _iter_entries(fs, path, TIME_INDEX_ENTRY):
        if k > 0 and rel == 0:
            break                   # the zero-filled tail of a preallocated index
        if k == 0 and ts == 0 and rel == 0 and n_file > 1:
            # a preallocated, still empty time index: Kafka's tool prints its first zero
            # slot as an entry, and so do we (it is no entry: nothing else is checked)
            yield dump_line(f"timestamp: 0 offset: {base}",
                            {"type": "timeindex_entry", "entry": 0, "timestamp": 0,
                             "offset": base, "unused": True})
            break
        offset = base + rel
        count += 1
        yield dump_line(f"timestamp: {ts} offset: {offset}",
               {"type": "timeindex_entry", "entry": k, "timestamp": ts, "offset": offset})
        where = k * TIME_INDEX_ENTRY.size
        if prev is not None and ts <= prev[0]:
            yield dump_problem(path, where, offset, f"entry {k}: timestamp {ts} is out of order (the "
                      f"previous entry has {prev[0]}; a broker appends only larger ones)")
        if prev is not None and offset < prev[1]:
            yield dump_problem(path, where, offset,
                      f"entry {k}: offset {offset} is below the previous entry's {prev[1]}")
        if ts < 0 or rel < 0:
            yield dump_problem(path, where, offset, f"entry {k} is negative")
        prev = (ts, offset)
    if count == 0:
        yield dump_note(f"{path} is empty.")


# ---- dump: files read whole ----------------------------------------------------------------

def _read_whole(fs, path: str) -> bytes:
    data = read_small_file(fs, path, _SMALL_FILE_LIMIT)
    if data is None:
        raise LogLayoutError("no such file", path=path)
    return data


def _dump_txn_index(fs, path: str, opts: DumpOptions) -> Iterator[DumpLine]:
    data = _read_whole(fs, path)
    n = len(data) // ABORTED_TXN.size
    for k in range(n):
        version, pid, first, last, lso = ABORTED_TXN.unpack_from(data, k * ABORTED_TXN.size)
        yield dump_line(f"version: {version} producerId: {pid} firstOffset: {first} "
               f"lastOffset: {last} lastStableOffset: {lso}",
               {"type": "txnindex_entry", "entry": k, "version": version, "producerId": pid,
                "firstOffset": first, "lastOffset": last, "lastStableOffset": lso})
        where = k * ABORTED_TXN.size
        if version != TXN_INDEX_VERSION:
            yield dump_problem(path, where, last, f"entry {k}: unknown version {version}")
        elif pid < 0 or first < 0 or first > last:
            yield dump_problem(path, where, last, f"entry {k}: impossible aborted transaction "
                      f"(producer {pid}, offsets {first}..{last})")
    if len(data) % ABORTED_TXN.size:
        yield dump_note(f"{len(data) % ABORTED_TXN.size} trailing bytes after the last whole entry "
               "(a crash mid-append; ignored)")
    if n == 0:
        yield dump_note(f"{path} is empty.")


def _dump_snapshot(fs, path: str, opts: DumpOptions) -> Iterator[DumpLine]:
    data = _read_whole(fs, path)
    try:
        parse_producer_snapshot(data, base_offset_of(posixpath.basename(path)), path)
    except KafkaLogError as e:
        yield dump_problem(path, e.position, e.offset, e.reason)
        return
    _version, _crc, count = SNAPSHOT_HEADER.unpack_from(data, 0)
    for k in range(count):
        (pid, epoch, last_seq, last_offset, delta, ts, coord,
         txn_first) = SNAPSHOT_ENTRY.unpack_from(data, SNAPSHOT_HEADER.size
                                                 + k * SNAPSHOT_ENTRY.size)
        first_seq = -1 if last_seq < 0 else (last_seq - delta if last_seq >= delta
                                              else INT32_MAX - (delta - last_seq) + 1)
        text = (f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: {coord} "
                f"currentTxnFirstOffset: "
                f"{f'OptionalLong[{txn_first}]' if txn_first >= 0 else 'OptionalLong.empty'}"
                f" lastTimestamp: {ts}")
        obj = {"type": "snapshot_entry", "producerId": pid, "producerEpoch": epoch,
               "coordinatorEpoch": coord,
               "currentTxnFirstOffset": txn_first if txn_first >= 0 else None,
               "lastTimestamp": ts}
        if last_offset >= 0:
            # an entry holds its last batch's metadata only when it has one (a producer
            # whose last write was a transaction marker or an epoch bump has none), and
            # Kafka's DumpLogSegments prints these fields only then
            text += (f" firstSequence: {first_seq} lastSequence: {last_seq} "
                     f"lastOffset: {last_offset} offsetDelta: {delta} timestamp: {ts}")
            obj.update(firstSequence=first_seq, lastSequence=last_seq,
                       lastOffset=last_offset, offsetDelta=delta)
        yield dump_line(text, obj)
    if count == 0:
        yield dump_note(f"{path} holds no producer entries.")


def _dump_checkpoint(fs, path: str, parse: Callable, show: Callable[..., DumpLine]
                     ) -> Iterator[DumpLine]:
    """A checkpoint file's entries (``parse(data, path)``), ``show(*entry)`` each; a
    malformed file is one problem (the parser's), an empty one a note."""
    data = _read_whole(fs, path)
    try:
        entries = parse(data, path)
    except KafkaLogError as e:
        yield dump_problem(path, e.position, e.offset, e.reason)
        return
    for entry in entries:
        yield show(*entry)
    if not entries:
        yield dump_note(f"{path} holds no entries.")


def _offset_checkpoint_entries(data: bytes, path: str) -> list:
    return list(parse_checkpoint(data, path).items())


def _offset_checkpoint_line(tp: tuple[str, int], offset: int) -> DumpLine:
    topic, partition = tp
    return dump_line(f"topic: {topic} partition: {partition} offset: {offset}",
                     {"type": "checkpoint_entry", "topic": topic, "partition": partition,
                      "offset": offset})


def _leader_epoch_line(epoch: int, start: int) -> DumpLine:
    return dump_line(f"epoch: {epoch} startOffset: {start}",
                     {"type": "leader_epoch_entry", "epoch": epoch, "startOffset": start})


def _dump_offset_checkpoint(fs, path: str, opts: DumpOptions) -> Iterator[DumpLine]:
    return _dump_checkpoint(fs, path, _offset_checkpoint_entries, _offset_checkpoint_line)


def _dump_leader_epochs(fs, path: str, opts: DumpOptions) -> Iterator[DumpLine]:
    return _dump_checkpoint(fs, path, parse_leader_epoch_checkpoint, _leader_epoch_line)


_DUMPERS: dict[str, Callable[..., Iterator[DumpLine]]] = {
    "log": dump_segment, "index": _dump_offset_index, "timeindex": _dump_time_index,
    "txnindex": _dump_txn_index, "snapshot": _dump_snapshot,
    "offset-checkpoint": _dump_offset_checkpoint,
    "leader-epoch-checkpoint": _dump_leader_epochs,
}



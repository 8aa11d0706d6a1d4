"""The batch reader: plans :class:`LogSlice` s on the driver, reads them on executors.

Spark pickles the reader once (after ``pushFilters``, before ``partitions``) and sends it
with every task; so everything ``read`` needs lives in the options and the pushdown, and
``read`` opens the log dirs itself (cached per Python worker process). ``read`` reads
and decodes one batch ahead of Spark in a background thread (:func:`prefetched`); a
packed task's slices in small segments are decoded a run at a time (:func:`read_slices`).
With ``valueFormat``/``keyFormat`` the batches' value and key become structs on the way out
(``spark_kafkalog.typed.columns.typed_batches``, planned on the driver: ``typed_read.py``).
"""
from __future__ import annotations

import queue
import threading
from typing import Iterator

from pyspark.sql.datasource import DataSourceReader, InputPartition

from spark_kafkalog.errors import CorruptRecordError
from spark_kafkalog.spark.filters import NONE, Pushdown, push, row_mask
from spark_kafkalog.spark.offset_ranges import LOSS_HINT
from spark_kafkalog.spark.options import ReadOptions
from spark_kafkalog.spark.packing import PackedSlices
from spark_kafkalog.spark.planning import LogSlice, plan
from spark_kafkalog.spark.worker import freeze_heap

_FILESYSTEMS: dict = {}
_FILESYSTEMS_LOCK = threading.Lock()


def open_logdirs(opts: ReadOptions):
    """A fresh ``LogDirs`` for the options (its listing and checkpoint caches start empty,
    so a reused Python worker sees the log as it is now), over a filesystem object shared
    by the tasks a worker runs (opening one, e.g. an S3 client, is not free)."""
    from spark_kafkalog.log import LogDirs

    key = (opts.paths, tuple(sorted(opts.filesystem_options.items())))
    with _FILESYSTEMS_LOCK:
        resolved = _FILESYSTEMS.get(key)
        if resolved is None:
            first = LogDirs(list(opts.paths), dict(opts.filesystem_options))
            resolved = (first.filesystem, first.roots)
            if len(_FILESYSTEMS) >= 16:
                _FILESYSTEMS.clear()
            _FILESYSTEMS[key] = resolved
    fs, roots = resolved
    return LogDirs(list(roots), dict(opts.filesystem_options), filesystem=fs)


def open_remote(opts: ReadOptions):
    """The remote tier of ``remoteStorage``, its filesystem shared by a worker's tasks."""
    from spark_kafkalog.log.read.remote import RemoteStorage

    key = ("remote", opts.remote_storage, opts.remote_layout,
           tuple(sorted(opts.filesystem_options.items())))
    with _FILESYSTEMS_LOCK:
        storage = _FILESYSTEMS.get(key)
        if storage is None:
            storage = RemoteStorage(opts.remote_storage, opts.remote_layout,
                                    dict(opts.filesystem_options))
            if len(_FILESYSTEMS) >= 16:
                _FILESYSTEMS.clear()
            _FILESYSTEMS[key] = storage
    return storage


def read_slice(logdirs, opts: ReadOptions, s: LogSlice, pushdown: Pushdown = NONE,
               warned: set | None = None) -> Iterator:
    """Arrow record batches (schema ``format.record_schema(opts.include_headers)``) of one
    slice, pushed row filters applied. Memory: one window of batches at a time.

    A local segment the driver listed and that is gone for good when the task opens it
    (retention or a compaction since planning) is answered by listing the partition
    again (:func:`~spark_kafkalog.log.read.purged.read_relisting`): records retention
    removed are data loss under ``failOnDataLoss`` (false: one warning per partition,
    ``warned`` holding those a task already warned about, and the rest of the slice);
    a compaction's new files are read."""
    from functools import partial

    from spark_kafkalog.log import read_partition
    from spark_kafkalog.log.read.purged import read_relisting

    relisting = partial(read_relisting, read_partition, warned=warned)
    if s.tier is not None:
        # a slice of the remote tier (planning ends it at the local log start): remote
        # segments are never pinned, and the local ones are read by local slices
        from spark_kafkalog.log.read.tiered import read_tiered
        batches = read_tiered(
            read_partition, logdirs, open_remote(opts), s.partition_dir, s.tier,
            start_offset=s.start_offset, end_offset=s.end_offset,
            isolation_level=opts.isolation_level, fail_on_data_loss=opts.fail_on_data_loss,
            include_headers=opts.include_headers, on_corruption=opts.on_corruption,
            window_bytes=opts.window_bytes, loss_hint=LOSS_HINT)
    else:
        batches = relisting(
            logdirs, s.partition_dir, start_offset=s.start_offset, end_offset=s.end_offset,
            isolation_level=opts.isolation_level, include_headers=opts.include_headers,
            on_corruption=opts.on_corruption, window_bytes=opts.window_bytes,
            start_position=s.start_position, memory_map=opts.memory_map,
            fail_on_data_loss=opts.fail_on_data_loss, loss_hint=LOSS_HINT)
    filtering = pushdown.has_row_filter
    try:
        for batch in batches:
            if filtering:
                mask = row_mask(batch, pushdown)
                if mask is not None:
                    batch = batch.filter(mask)
            if batch.num_rows:
                yield batch
    except CorruptRecordError as e:
        # the option that gets a reader past damage, in the one line Spark shows
        if opts.on_corruption != "fail":
            raise
        raise _with_fix(e) from None


def _with_fix(e: CorruptRecordError) -> CorruptRecordError:
    fix = ("; to read past damaged bytes set option onCorruption=skip (drop them) or "
           "onCorruption=stop (end the partition there)")
    return type(e)(e.reason + fix, path=e.path, position=e.position, offset=e.offset)


#: a packed task's small batches are joined into batches of at least this many rows (or
#: COALESCE_BYTES): Spark pays per Arrow batch it takes from a Python worker
COALESCE_ROWS = 65_536
COALESCE_BYTES = 8 * 1024 * 1024


def coalesced(batches: Iterator, min_rows: int = COALESCE_ROWS,
              max_bytes: int = COALESCE_BYTES) -> Iterator:
    """``batches`` joined in order into batches of at least ``min_rows`` rows (the last
    may be smaller), a joined batch ending early once it holds ``max_bytes``. Batches
    already that large pass through uncopied. Memory: one joined batch."""
    import pyarrow as pa

    buf, rows, size = [], 0, 0
    for b in batches:
        if not buf and (b.num_rows >= min_rows or b.nbytes >= max_bytes):
            yield b
            continue
        buf.append(b)
        rows += b.num_rows
        size += b.nbytes
        if rows >= min_rows or size >= max_bytes:
            yield pa.Table.from_batches(buf).combine_chunks().to_batches()[0]
            buf, rows, size = [], 0, 0
    if buf:
        yield (buf[0] if len(buf) == 1
               else pa.Table.from_batches(buf).combine_chunks().to_batches()[0])


#: a packed task reads its slices that lie in one small segment a run at a time, with one
#: kernel call per run (:mod:`spark_kafkalog.log.read.packed`); False: slice by slice
#: (the general path, which tests compare it with)
PACKED_KERNEL = True


def read_slices(logdirs, opts: ReadOptions, slices, pushdown: Pushdown = NONE) -> Iterator:
    """Arrow record batches of ``slices`` in order, as :func:`read_slice` of each gives
    them. Slices in one small segment go in runs of at most COALESCE_ROWS rows and
    ``min(COALESCE_BYTES, windowBytes)`` bytes of segments through one kernel call each
    (read_uncommitted); a run the kernel does not take, and every other slice, is read
    by :func:`read_slice`. Memory: one run's segments and rows, or one window."""
    warned: set = set()         # partitions warned about by this task (failOnDataLoss=false)
    if not PACKED_KERNEL or opts.isolation_level != "read_uncommitted":
        for s in slices:
            yield from read_slice(logdirs, opts, s, pushdown, warned)
        return
    from spark_kafkalog.log.read.packed import small_range

    max_bytes = min(COALESCE_BYTES, int(opts.window_bytes))
    run, items, rows, size = [], [], 0, 0
    for s in slices:
        item = small_range(s.partition_dir, s.start_offset, s.end_offset, s.start_position,
                           max_bytes)
        if item is None:
            if run:
                yield from _read_run(logdirs, opts, run, items, pushdown, warned)
                run, items, rows, size = [], [], 0, 0
            yield from read_slice(logdirs, opts, s, pushdown, warned)
            continue
        if run and size + item[0].size > max_bytes:
            yield from _read_run(logdirs, opts, run, items, pushdown, warned)
            run, items, rows, size = [], [], 0, 0
        run.append(s)
        items.append(item)
        rows += s.end_offset - s.start_offset
        size += item[0].size
        if rows >= COALESCE_ROWS:
            yield from _read_run(logdirs, opts, run, items, pushdown, warned)
            run, items, rows, size = [], [], 0, 0
    if run:
        yield from _read_run(logdirs, opts, run, items, pushdown, warned)


def _read_run(logdirs, opts: ReadOptions, run, items, pushdown: Pushdown,
              warned: set | None = None) -> Iterator:
    from spark_kafkalog.log.read.packed import read_small

    batch = read_small(logdirs.filesystem, items, include_headers=opts.include_headers,
                       memory_map=opts.memory_map)
    if batch is None:
        # a segment read_small cannot take (one gone since planning among them): each
        # slice through read_slice, which applies the policies and lists a gone one again
        for s in run:
            yield from read_slice(logdirs, opts, s, pushdown, warned)
        return
    if pushdown.has_row_filter:
        mask = row_mask(batch, pushdown)
        if mask is not None:
            batch = batch.filter(mask)
    if batch.num_rows:
        yield batch


#: batches decoded ahead of the one Spark is consuming (see :func:`prefetched`); 0 reads
#: in Spark's thread (no prefetch thread)
PREFETCH_BATCHES = 1

_ITEM, _ERROR, _END = 0, 1, 2


def prefetched(make_iter, depth: int = PREFETCH_BATCHES) -> Iterator:
    """The items of ``make_iter()``, produced by a background thread up to ``depth``
    items ahead of the consumer.

    Why: a Python worker alternates between decoding a batch (our kernel, the window
    read and the CRC pass release the GIL) and handing the previous one to Spark
    (Arrow IPC onto the worker's socket, which also waits on the JVM). Done in one
    thread those add up; here the next window is read and decoded while Spark takes
    the current batch.

    Contract: items arrive in order; an exception raised by the iterator is re-raised
    here, at the point of the stream where it happened (items before it are delivered
    first). Closing this generator early (Spark stops a task after a LIMIT) stops the
    producer after the item it is working on and closes the source iterator in the
    producer thread; nothing is left running. Memory: at most ``depth`` queued items,
    one being produced and the one the consumer holds.
    """
    handoff: queue.Queue = queue.Queue(maxsize=max(1, depth))   # never unbounded
    stop = threading.Event()

    def produce():
        last = (_END, None)
        try:
            it = make_iter()
            try:
                for item in it:
                    handoff.put((_ITEM, item))
                    del item
                    if stop.is_set():
                        break
            finally:
                close = getattr(it, "close", None)
                if close is not None:
                    close()
        except BaseException as err:     # handed to the consumer, which re-raises it
            last = (_ERROR, err)
        # always the producer's last word: the consumer waits for it
        handoff.put(last)

    worker = threading.Thread(target=produce, name="kafkalog-prefetch", daemon=True)
    worker.start()
    finished = False
    try:
        while True:
            kind, value = handoff.get()
            if kind == _ITEM:
                yield value
                del value
            elif kind == _ERROR:
                finished = True
                raise value
            else:
                finished = True
                return
    finally:
        if not finished:
            # early close: let the producer see the flag, unblock its put, and wait for
            # its _END (or _ERROR, which nobody wants any more)
            stop.set()
            while handoff.get()[0] == _ITEM:
                pass
        worker.join()


def with_registry_now(opts: ReadOptions, typed, logdirs, parts: list) -> list:
    """``parts`` (just planned through ``logdirs``) carrying the typed read with the
    registry read again through the same ``logdirs``: its topic bounded by the same
    reading of the log's checkpoints as the data, one snapshot. ``schema()`` planned the
    typed read (and Spark's schema) earlier, on a LogDirs of its own; a schema registered
    between then and the data's pin may be named by records planned, and is seen (a
    writer added; the reader schema stays the query's), while one registered after the
    pin is not. The slices carry it because Spark ships the reader as it was before
    ``partitions``."""
    from dataclasses import replace

    from spark_kafkalog.spark.typed_read import refresh_typed

    now = refresh_typed(opts, typed, logdirs)
    if now == typed:
        return parts
    out = []
    for p in parts:
        if isinstance(p, PackedSlices):
            out.append(replace(p, slices=tuple(replace(s, typed=now) for s in p.slices)))
        else:
            out.append(replace(p, typed=now))
    return out


def with_dead_letter_headers(opts: ReadOptions, typed) -> ReadOptions:
    """``opts`` to read the log with: headers included when a dead letter is written
    (its records are whole) even if the read's rows leave them out."""
    if typed is None or opts.typed is None or opts.typed.dead_letter is None or \
            opts.include_headers:
        return opts
    from dataclasses import replace
    return replace(opts, include_headers=True)


def typed_output(batches, opts: ReadOptions, typed, slices) -> Iterator:
    """``batches`` of ``slices`` with the typed columns decoded
    (:func:`~spark_kafkalog.typed.columns.typed_batches`); with ``deadLetterPath``, the
    records that do not decode written there, one file per slice with any
    (``log/read/dead_letter.py``), published when the task has read its slices through
    (or was closed early: what it read), dropped when it fails (a retry writes them)."""
    from spark_kafkalog.typed.columns import typed_batches

    dead = opts.typed.dead_letter if opts.typed is not None else None
    if dead is None:
        yield from typed_batches(batches, typed)
        return
    from spark_kafkalog.log.read.dead_letter import DeadLetterSink, open_dead_letter_dir

    fs, directory = open_dead_letter_dir(dead, opts.filesystem_options)
    sink = DeadLetterSink(fs, directory, [(s.topic, s.partition, s.start_offset,
                                           s.end_offset) for s in slices])
    try:
        yield from typed_batches(batches, typed, dead_letter=sink,
                                 drop_headers=not opts.include_headers)
    except BaseException as err:
        if isinstance(err, GeneratorExit):
            sink.commit()
        else:
            sink.abort()
        raise
    sink.commit()


class KafkaLogReader(DataSourceReader):
    """Batch reader without filter pushdown (what Spark gets when
    ``spark.sql.python.filterPushdown.enabled`` is false: Spark refuses a reader that
    overrides ``pushFilters`` then)."""

    def __init__(self, opts: ReadOptions, typed=None):
        self.opts = opts
        #: the planned typed read (spark_kafkalog.typed.columns.TypedRead) or None
        self.typed = typed
        self.pushdown = NONE

    def partitions(self) -> list[InputPartition]:
        freeze_heap()
        logdirs = open_logdirs(self.opts)
        parts = list(plan(logdirs, self.opts, self.pushdown))
        if self.typed is None or not parts:
            return parts
        return with_registry_now(self.opts, self.typed, logdirs, parts)

    def read(self, partition: InputPartition) -> Iterator:
        freeze_heap()           # see spark/worker.py: Spark's gc.collect() after the task
        # Spark substitutes InputPartition(None) when partitions() is empty: no rows.
        if isinstance(partition, LogSlice):
            slices = (partition,)
        elif isinstance(partition, PackedSlices):
            slices = partition.slices
        else:
            return iter(())
        opts, pushdown, typed = self.opts, self.pushdown, self.typed
        typed = slices[0].typed if slices and slices[0].typed is not None else typed

        def rows():
            logdirs = open_logdirs(opts)
            source = with_dead_letter_headers(opts, typed)
            if len(slices) == 1:
                batches = read_slice(logdirs, source, slices[0], pushdown)
            else:
                batches = coalesced(read_slices(logdirs, source, slices, pushdown))
            if typed is not None:
                batches = typed_output(batches, opts, typed, slices)
            yield from batches

        if PREFETCH_BATCHES <= 0:
            return rows()
        return prefetched(rows)


class KafkaLogPushdownReader(KafkaLogReader):
    """Batch reader with filter pushdown (see :mod:`.filters` for what is accepted)."""

    def pushFilters(self, filters):
        self.pushdown, rejected = push(list(filters), self.pushdown)
        return iter(rejected)

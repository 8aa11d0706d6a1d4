"""The remote tier (KIP-405): which remote segments make up a partition, from the
``__remote_log_metadata`` topic in the log dirs (never by listing the store), and reading
them through ``pyarrow.fs`` from the remote root.

:class:`RemoteStorage` is the remote root (a URI, its layout, filesystem options) and the
:class:`~spark_kafkalog.log.model.LogSource` the reader reads remote segments through;
:func:`remote_segments` the readable segments of one topic, per partition, as the broker
would serve them (COPY_SEGMENT_FINISHED, not being deleted, in offset order, a segment
another one covers dropped). Reading them with the local tier is :mod:`.tiered`.

:func:`check_root` (at planning) refuses a root that holds no object of a topic the
metadata lists segments of: the wrong directory (say ``rsm.config.dir``, above
LocalTieredStorage's ``kafka-tiered-storage``) is a configuration error, not data loss;
it names a root or layout below the given one that holds them. One request per topic
when the first segment is there.
"""
from __future__ import annotations

from typing import Iterable, Mapping

import pyarrow.fs as pafs

from spark_kafkalog.errors import (
    InvalidOptionError,
    RemoteLogMetadataError,
    UnsupportedFormatError,
)
from spark_kafkalog.format.remote_log_metadata import TOPIC, RemoteLogMetadataState
from spark_kafkalog.log.io import read_range, resolve_filesystem
from spark_kafkalog.log.model import PartitionDir, Segment
from spark_kafkalog.log.model.remote import (
    LOCAL_TIERED_STORAGE,
    SUFFIXES,
    RemoteLayout,
    RemoteSegment,
)

__all__ = ["RemoteStorage", "feed_metadata", "remote_segments", "remote_partition_dir",
           "check_root", "root_problem"]

#: a Kafka batch header begins ``baseOffset int64, batchLength int32, partitionLeaderEpoch
#: int32, magic int8``: the bytes a plain copy of a segment must start with
_MAGIC_AT = 16


class RemoteStorage:
    """A remote tier's root (``uri``), its :class:`RemoteLayout` and the options of its
    filesystem (as ``path``'s: ``s3.endpoint`` ...). Picklable (the filesystem is
    resolved again on the other side)."""

    def __init__(self, uri: str, layout: str | RemoteLayout | None = None,
                 filesystem_options: Mapping | None = None,
                 filesystem: pafs.FileSystem | None = None):
        self.uri = str(uri)
        self.layout = layout if isinstance(layout, RemoteLayout) else RemoteLayout.parse(layout)
        self.filesystem_options = dict(filesystem_options or {})
        if filesystem is not None:
            self.filesystem, self.root = filesystem, self.uri.rstrip("/") or "/"
        else:
            self.filesystem, self.root = resolve_filesystem(self.uri, self.filesystem_options)

    def __getstate__(self):
        return {"uri": self.uri, "layout": self.layout, "filesystem": self.filesystem,
                "root": self.root, "filesystem_options": self.filesystem_options}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return f"RemoteStorage({self.uri!r}, layout={self.layout.name!r})"

    # LogSource: a remote segment has no checkpoints; its bounds come from the metadata
    def checkpointed_high_watermark(self, p: PartitionDir) -> int | None:
        return None

    def checkpointed_log_start_offset(self, p: PartitionDir) -> int | None:
        return None

    def path(self, seg: RemoteSegment, suffix: str) -> str:
        return self.layout.object_path(self.root, seg, suffix)

    def exists(self, path: str) -> bool:
        return self.filesystem.get_file_info(path).type != pafs.FileType.NotFound

    def check_plain(self, seg: RemoteSegment) -> None:
        """Refuse a ``.log`` object that is not a plain copy of a Kafka segment (one an
        RSM plugin compressed, chunked or encrypted): its first batch header must start
        at the segment's offsets with a known magic. One small ranged read."""
        path = self.path(seg, ".log")
        head = read_range(self.filesystem, path, 0, _MAGIC_AT + 1)
        if not head and seg.size == 0:
            return
        base = int.from_bytes(head[:8], "big", signed=True) if len(head) >= 8 else -1
        magic = head[_MAGIC_AT] if len(head) > _MAGIC_AT else -1
        if not (seg.start_offset <= base <= seg.end_offset and magic in (0, 1, 2)):
            plugin = (" The segment's metadata carries custom metadata, as RSM plugins that "
                      "transform segments write.") if seg.has_custom_metadata else ""
            raise UnsupportedFormatError(
                f"remote object of {seg.topic}-{seg.partition} segment {seg.segment_id} "
                f"(offsets {seg.start_offset}..{seg.end_offset}) is not a plain Kafka "
                f"segment (first batch base offset {base}, magic {magic}): the remote "
                f"storage plugin stores its own format (compressed, chunked or encrypted), "
                f"which layout {self.layout.name!r} cannot read.{plugin}",
                path=path, position=0, offset=seg.start_offset)


def feed_metadata(state: RemoteLogMetadataState, table) -> RemoteLogMetadataState:
    """Add the records of a read of ``__remote_log_metadata`` (Spark's Kafka columns, in
    partition then offset order) to ``state``."""
    for batch in table.to_batches():
        cols = batch.to_pydict()
        for value, part, off, ts in zip(cols["value"], cols["partition"], cols["offset"],
                                        cols["timestamp"]):
            state.add(value, part, off, None if ts is None else int(ts.timestamp() * 1000))
    return state


def remote_segments(state: RemoteLogMetadataState, topic: str
                    ) -> dict[int, list[RemoteSegment]]:
    """partition -> readable remote segments of ``topic``, in offset order. A segment
    whose offsets another readable one already covers is dropped (a copy the broker
    retried); partly overlapping ones are kept, the reader starts each where the
    previous ended. One topic id per topic: two (a topic deleted and recreated) raise
    RemoteLogMetadataError unless only one has readable segments."""
    by_part: dict[int, list[RemoteSegment]] = {}
    ids = set()
    for row in state.segment_rows():
        if row["topic"] != topic or not row["readable"]:
            continue
        ids.add(row["topic_id"])
        epochs = tuple(sorted((e["leader_epoch"], e["offset"])
                              for e in row["segment_leader_epochs"]))
        by_part.setdefault(row["partition"], []).append(RemoteSegment(
            topic=topic, topic_id=row["topic_id"], partition=row["partition"],
            segment_id=row["segment_id"], start_offset=row["start_offset"],
            end_offset=row["end_offset"], size=row["segment_size_in_bytes"],
            leader_epochs=epochs, txn_index_empty=bool(row["txn_index_empty"]),
            max_timestamp_ms=row["max_timestamp_ms"],
            has_custom_metadata=row["custom_metadata"] is not None))
    if len(ids) > 1:
        raise RemoteLogMetadataError(f"{TOPIC} lists readable segments of topic {topic!r} "
                                     f"under several topic ids {sorted(ids)}")
    out = {}
    for part, segs in by_part.items():
        segs.sort(key=lambda s: (s.start_offset, -s.end_offset))
        kept: list[RemoteSegment] = []
        for s in segs:
            if kept and s.end_offset <= kept[-1].end_offset:
                continue
            kept.append(s)
        out[part] = kept
    return out


def remote_partition_dir(storage: RemoteStorage, seg: RemoteSegment) -> PartitionDir:
    """A one-segment PartitionDir over a remote segment's objects (its size and end from
    the metadata: no request; a batch past the end is damage). The transaction index
    only where the metadata says it is not empty (LocalTieredStorage copies no empty one)."""
    path = storage.path(seg, ".log")
    s = Segment(base_offset=seg.start_offset, path=path, size=seg.size,
                index_path=storage.path(seg, ".index"),
                timeindex_path=storage.path(seg, ".timeindex"),
                txnindex_path=None if seg.txn_index_empty else storage.path(seg, ".txnindex"))
    return PartitionDir(topic=seg.topic, partition=seg.partition, root=storage.root,
                        path=path.rsplit("/", 1)[0], segments=(s,),
                        end_offset=seg.end_offset + 1)


#: at most this many directories are listed, or .log objects asked for, to tell a wrong
#: root from lost segments (only when the first segment is missing)
_PROBE_LIMIT = 256


def check_root(storage: RemoteStorage, segments: Iterable[RemoteSegment],
               option: str = "remoteStorage") -> None:
    """Raise :func:`root_problem`'s InvalidOptionError, if any."""
    err = root_problem(storage, segments, option)
    if err is not None:
        raise err


def root_problem(storage: RemoteStorage, segments: Iterable[RemoteSegment],
                 option: str = "remoteStorage") -> InvalidOptionError | None:
    """An InvalidOptionError naming ``option`` (the root's option, as the user typed it)
    when ``storage`` holds no object of a topic ``segments`` (readable remote segments)
    belong to, with the root or layout below it that does hold them when there is one;
    None when each topic has an object there (a root that holds some but not all is
    data loss, which the read reports). Asks for the first segment's ``.log`` (one
    request per topic); lists the directories its objects would be in only when that
    is missing."""
    by_topic: dict[str, list[RemoteSegment]] = {}
    for seg in segments:
        by_topic.setdefault(seg.topic, []).append(seg)
    for topic in sorted(by_topic):
        segs = sorted(by_topic[topic], key=lambda s: (s.partition, s.start_offset))
        if storage.exists(storage.path(segs[0], ".log")) or _holds_any(storage, segs):
            continue
        where = storage.filesystem.get_file_info(storage.root)
        if where.type == pafs.FileType.NotFound:
            found = f"{storage.uri} does not exist"
        else:
            found = f"{storage.uri} holds no object of topic {topic!r}"
        hint = _elsewhere(storage, segs[0], option)
        return InvalidOptionError(
            f"{option}: {found} (__remote_log_metadata lists {len(segs)} remote "
            f"segment(s) of it, the first at {storage.path(segs[0], '.log')} in layout "
            f"{storage.layout.name!r}): that is not the root of its remote tier"
            + (f"; {hint}" if hint else "; give the directory the remote storage "
               "manager writes segments to (for LocalTieredStorage, the "
               "kafka-tiered-storage directory under its dir setting)"))
    return None


def _holds_any(storage: RemoteStorage, segs: list[RemoteSegment]) -> bool:
    """Whether the store holds any object of ``segs``: the directories their objects
    would be in are listed (one per partition in LocalTieredStorage's layout); with
    more directories than the limit, the ``.log`` objects are asked for. Unsure (too many
    to ask): True, and the read reports what is missing."""
    fs = storage.filesystem
    wanted = {storage.path(s, suffix) for s in segs for suffix in SUFFIXES}
    parents = sorted({p.rsplit("/", 1)[0] for p in wanted})
    if len(parents) <= _PROBE_LIMIT:
        for parent in parents:
            try:
                infos = fs.get_file_info(pafs.FileSelector(parent, allow_not_found=True))
            except (OSError, ValueError):
                return True
            if any(info.path in wanted for info in infos):
                return True
        return False
    if len(segs) > _PROBE_LIMIT:
        return True
    infos = fs.get_file_info([storage.path(s, ".log") for s in segs])
    return any(info.type != pafs.FileType.NotFound for info in infos)


def _elsewhere(storage: RemoteStorage, seg: RemoteSegment, option: str) -> str | None:
    """Where ``seg``'s ``.log`` is, when not under the root in its layout: in
    LocalTieredStorage's layout at the root, or either layout in a directory right
    below the root (``kafka-tiered-storage`` first)."""
    fs = storage.filesystem
    layouts = [storage.layout]
    if storage.layout.name != LOCAL_TIERED_STORAGE:
        layouts.append(RemoteLayout.parse(LOCAL_TIERED_STORAGE))
    for layout in layouts[1:]:
        if storage.exists(layout.object_path(storage.root, seg, ".log")):
            return f"its objects are there in layout {layout.name!r}: did you mean that layout?"
    try:
        children = fs.get_file_info(pafs.FileSelector(storage.root, allow_not_found=True))
    except (OSError, ValueError):
        return None
    dirs = sorted((c for c in children if c.type == pafs.FileType.Directory),
                  key=lambda c: (c.base_name != "kafka-tiered-storage", c.base_name))
    for child in dirs[:_PROBE_LIMIT]:
        for layout in layouts:
            if storage.exists(layout.object_path(child.path, seg, ".log")):
                other = (f" (layout {layout.name!r})" if layout is not storage.layout
                         else "")
                return (f"did you mean {option} {storage.uri.rstrip('/')}/"
                        f"{child.base_name}{other}?")
    return None

"""The remote tier (KIP-405): which remote segments make up a partition, from the
``__remote_log_metadata`` topic in the log dirs (never by listing the store), and reading
them through ``pyarrow.fs`` from the remote root.

:class:`RemoteStorage` is the remote root (a URI, its layout, filesystem options) and the
:class:`~spark_kafkalog.log.model.LogSource` the reader reads remote segments through;
:func:`remote_segments` the readable segments of one topic, per partition, as the broker
would serve them (COPY_SEGMENT_FINISHED, not being deleted, in offset order, a segment
another one covers dropped). Reading them with the local tier is :mod:`.tiered`.
"""
from __future__ import annotations

from typing import Mapping

import pyarrow.fs as pafs

from spark_kafkalog.errors import RemoteLogMetadataError, UnsupportedFormatError
from spark_kafkalog.format.remote_log_metadata import TOPIC, RemoteLogMetadataState
from spark_kafkalog.log.io import read_range, resolve_filesystem
from spark_kafkalog.log.model import PartitionDir, Segment
from spark_kafkalog.log.model.remote import RemoteLayout, RemoteSegment

__all__ = ["RemoteStorage", "feed_metadata", "remote_segments", "remote_partition_dir"]

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

"""The remote tier (KIP-405) as values: a remote segment as ``__remote_log_metadata`` lists
it, and where a remote storage manager (RSM) keeps its objects (no I/O).

Layouts (``remoteLayout``):

- ``local-tiered-storage`` (default): Kafka's LocalTieredStorage, the root being the
  ``kafka-tiered-storage`` dir under its ``dir`` setting::

      {topic}-{partition}-{topic_id}/{start_offset:020d}-{segment_id}{suffix}

- a path template relative to the root, for an RSM storing plain copies under another
  naming, with the placeholders ``{topic} {partition} {topic_id} {segment_id}
  {start_offset} {end_offset} {suffix}`` (``{start_offset}`` is zero-padded to 20 digits
  like Kafka's file names, ``{start_offset_raw}`` is not); ``{suffix}`` is one of
  ``.log .index .timeindex .txnindex .snapshot .leader_epoch_checkpoint``.

Segment and topic ids are Kafka's ``Uuid.toString()`` (url-safe base64, no padding).
"""
from __future__ import annotations

import string
from dataclasses import dataclass

from spark_kafkalog.errors import InvalidOptionError

__all__ = ["RemoteSegment", "RemoteLayout", "LOCAL_TIERED_STORAGE", "SUFFIXES"]

LOCAL_TIERED_STORAGE = "local-tiered-storage"
_LTS_TEMPLATE = "{topic}-{partition}-{topic_id}/{start_offset}-{segment_id}{suffix}"
#: the objects of one remote segment (LocalTieredStorage's RemoteLogSegmentFileType)
SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot",
            ".leader_epoch_checkpoint")
_FIELDS = {"topic", "partition", "topic_id", "segment_id", "start_offset",
           "start_offset_raw", "end_offset", "suffix"}


@dataclass(frozen=True)
class RemoteSegment:
    """One readable remote segment (COPY_SEGMENT_FINISHED, not being deleted). Picklable."""
    topic: str
    topic_id: str
    partition: int
    segment_id: str
    start_offset: int
    end_offset: int                      # inclusive, as Kafka's metadata has it
    size: int                            # segmentSizeInBytes
    leader_epochs: tuple[tuple[int, int], ...]   # (epoch, start offset), ascending
    txn_index_empty: bool
    max_timestamp_ms: int
    has_custom_metadata: bool = False    # set by RSM plugins that transform objects


@dataclass(frozen=True)
class RemoteLayout:
    """Where a remote segment's objects are under the root. Picklable."""
    template: str

    @classmethod
    def parse(cls, value: str | None) -> "RemoteLayout":
        text = (value or LOCAL_TIERED_STORAGE).strip()
        if text == LOCAL_TIERED_STORAGE:
            return cls(_LTS_TEMPLATE)
        try:
            names = {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}
        except ValueError as err:
            raise InvalidOptionError(f"remoteLayout: {text!r} is not a path template: "
                                     f"{err}") from None
        unknown = names - _FIELDS
        if unknown:
            raise InvalidOptionError(f"remoteLayout: unknown placeholders {sorted(unknown)} in "
                                     f"{text!r}; known: {sorted(_FIELDS)}")
        if "suffix" not in names or not names & {"segment_id", "start_offset",
                                                  "start_offset_raw"}:
            raise InvalidOptionError(
                f"remoteLayout: {text!r} must name each object: it needs {{suffix}} and "
                "{segment_id} or {start_offset}")
        if text.startswith("/") or ".." in text.split("/"):
            raise InvalidOptionError(f"remoteLayout: {text!r} must be relative to the root")
        return cls(text)

    @property
    def name(self) -> str:
        return LOCAL_TIERED_STORAGE if self.template == _LTS_TEMPLATE else self.template

    def object_path(self, root: str, seg: RemoteSegment, suffix: str) -> str:
        rel = self.template.format(
            topic=seg.topic, partition=seg.partition, topic_id=seg.topic_id,
            segment_id=seg.segment_id, start_offset=f"{seg.start_offset:020d}",
            start_offset_raw=seg.start_offset, end_offset=seg.end_offset, suffix=suffix)
        return f"{root.rstrip('/')}/{rel}" if root not in ("", "/") else f"/{rel}"

"""Writing a Kafka log dir: tasks stage encoded batches (:mod:`.staging`), the driver
commits them whole or not at all (:mod:`.commit`: :mod:`.plan`, :mod:`.apply`, the
:mod:`.journal`, :mod:`.recovery`, under the locks of :mod:`.lock`). Page-cache and flush
tuning is in :mod:`.flush`; :func:`.table.write_table` writes an Arrow table in one call
(``offsets="preserve"`` keeps each record's offset). The names below are what the Spark writer, jobs and tests use.

They are imported on first use, so that a reader importing only :mod:`.journal` (to
bound what it returns by the writes in flight) does not load the writer.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "CommitResult": "commit", "abort_write": "commit", "commit_write": "commit",
    "MODES": "config", "OFFSET_MODES": "config", "AppendConfig": "config",
    "TopicSpec": "config",
    "partition_dir": "config", "segment_file": "config",
    "topic_partitions": "files",
    "check_broker_lock": "lock",
    "recover": "recovery", "recover_topic": "recovery",
    "BATCH_TABLE_DTYPE": "staging", "StagedFile": "staging", "StagedSection": "staging",
    "StagingWriter": "staging", "batch_table": "staging", "OWN_FILE_MIN_BYTES": "staging",
    "write_table": "table",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))

"""Writing a Kafka log dir: tasks stage encoded batches (:mod:`.staging`), the driver
commits them whole or not at all (:mod:`.commit`: :mod:`.plan`, :mod:`.apply`, the
journal, :mod:`.recovery`, under the locks; the journal and the lock files are file formats
the readers read too, so they are ``log.files.journal`` and ``log.files.lock``). Page-cache and flush
tuning is in :mod:`.flush`; :func:`.table.write_table` writes an Arrow table in one call
(``offsets="preserve"`` keeps each record's offset), and :func:`.typed_write.write_table`
(the ``write_table`` named here) also encodes typed ``value`` / ``key`` columns. The names below are what the Spark writer, jobs and tests use.

They are imported on first use, so that importing one of them does not load the whole
writer.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "CommitResult": "commit", "abort_write": "commit", "commit_write": "commit",
    "MODES": "config", "OFFSET_MODES": "config", "AppendConfig": "config",
    "TopicSpec": "config",
    "partition_dir": "config", "segment_file": "config",
    "topic_partitions": "files",
    "check_broker_lock": "spark_kafkalog.log.files.lock",
    "recover": "recovery", "recover_topic": "recovery",
    "BATCH_TABLE_DTYPE": "staging", "StagedFile": "staging", "StagedSection": "staging",
    "StagingWriter": "staging", "batch_table": "staging", "OWN_FILE_MIN_BYTES": "staging",
    "write_table": "typed_write", "TypedWrite": "typed_write",
    "record_owner": "leftovers", "remove_dead_staging": "leftovers",
    "staging_leftovers": "leftovers",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    where = module if "." in module else f"{__name__}.{module}"
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))

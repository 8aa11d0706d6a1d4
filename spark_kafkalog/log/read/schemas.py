"""The schema registry's topic read from a log dir: :func:`read_registry` reads
``_schemas`` (the registry's ``kafkastore.topic``) as the registry's own consumer does
(read_uncommitted, every record up to the high watermark, both tiers with a remote
storage) and hands the records to :class:`~spark_kafkalog.typed.registry.RegistryState`.
"""
from __future__ import annotations

from typing import Mapping

from spark_kafkalog.errors import LogLayoutError
from spark_kafkalog.log.read.discovery import LogDirs
from spark_kafkalog.log.read.reader import read_table
from spark_kafkalog.typed.registry import RegistryState

__all__ = ["DEFAULT_TOPIC", "read_registry", "registry_like_topics"]

#: the registry's ``kafkastore.topic`` default (Confluent, Karapace and Redpanda alike)
DEFAULT_TOPIC = "_schemas"


def registry_like_topics(logdirs: LogDirs) -> list[str]:
    """Topics whose name suggests a schema registry's store (``*schema*``)."""
    return [t for t in logdirs.topics() if "schema" in t.lower()]


def read_registry(path, topic: str = DEFAULT_TOPIC, *, remote_storage=None,
                  remote_layout: str | None = None,
                  filesystem_options: Mapping | None = None,
                  as_of: str | int | None = None, on_error: str = "fail") -> RegistryState:
    """The registry's state from the ``topic`` of the log dir(s) at ``path`` (as in
    :func:`~spark_kafkalog.log.read_table`: URIs, a list, or a LogDirs).

    ``remote_storage`` / ``remote_layout``: the remote tier (KIP-405), read below the
    local log. ``as_of``: a commit of the topic's journal (``as_of_commit``: a log a
    kafkalog writer appended to). ``on_error``: as
    :meth:`RegistryState.from_records`. Raises LogLayoutError when the log dirs hold no
    such topic (naming the topics that look like a registry's), SchemaRegistryError on
    a record the registry cannot read, and what ``read_table`` raises (data loss,
    corruption)."""
    logdirs = path if isinstance(path, LogDirs) else LogDirs(path, filesystem_options,
                                                             include_internal=True)
    if topic not in logdirs.topics():
        like = registry_like_topics(logdirs)
        hint = (f"; topics that look like a registry's: {', '.join(like)} (pass "
                "topic=..., the registry's kafkastore.topic)") if like else \
            "; no topic there looks like a schema registry's"
        raise LogLayoutError(f"schema registry topic {topic!r} not found in log dirs "
                             f"{', '.join(logdirs.roots)}{hint}")
    table = read_table(logdirs, topic, isolation_level="read_uncommitted",
                       include_headers=False, remote_storage=remote_storage,
                       remote_layout=remote_layout, as_of_commit=as_of,
                       filesystem_options=filesystem_options)
    # the registry's topic has one partition; should it have more, each is applied in
    # offset order, partition after partition (the table's order)
    return RegistryState.from_records(table.select(["partition", "offset", "key", "value"]),
                                      topic=topic, on_error=on_error)

"""``partition.metadata``: the topic id a KRaft broker keeps in each partition dir
(Kafka's ``PartitionMetadataFile``: ``version: 0`` and ``topic_id: <Uuid>`` lines), and
the rules of a topic id as ``Uuid.toString`` writes it.
"""
from __future__ import annotations

import base64

import pyarrow.fs as pafs

from spark_kafkalog.errors import InvalidOptionError, LogLayoutError
from spark_kafkalog.log.io import write_atomic

FILE_NAME = "partition.metadata"
#: Uuid.ZERO_UUID and Uuid.METADATA_TOPIC_ID, which no ordinary topic has
RESERVED_IDS = (bytes(16), bytes(15) + b"\x01")


def check_topic_id(text: str, where: str) -> str:
    """``text`` when it is a topic id: 16 bytes in URL-safe base64 without padding (22
    characters), not a reserved id; else :class:`InvalidOptionError` naming ``where``."""
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except ValueError:
        raw = b""
    if len(text) != 22 or len(raw) != 16 or \
            base64.urlsafe_b64encode(raw).rstrip(b"=").decode() != text:
        raise InvalidOptionError(f"{where}: {text!r} is not a Kafka topic id (22 characters "
                                 "of URL-safe base64, e.g. vqSmEBIuSwm33bh8npzjMw)")
    if raw in RESERVED_IDS:
        raise InvalidOptionError(f"{where}: {text!r} is a reserved topic id")
    return text


def read_topic_id(fs: pafs.FileSystem, partition_dir: str) -> str | None:
    """The topic id of a partition dir's ``partition.metadata``; None without the file.
    Raises :class:`LogLayoutError` for a file that is not version 0 with a valid id."""
    path = f"{partition_dir}/{FILE_NAME}"
    try:
        with fs.open_input_stream(path) as fh:
            text = fh.read(4096).decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise LogLayoutError(f"not a version 0 {FILE_NAME}", path=path)
    try:
        return check_topic_id(fields["topic_id"], path)
    except InvalidOptionError as err:
        raise LogLayoutError(str(err), path=path) from None


def write_topic_id(fs: pafs.FileSystem, partition_dir: str, topic_id: str) -> None:
    """Write a partition dir's ``partition.metadata`` whole or not at all (no temp file
    left when the disk is full)."""
    data = f"version: 0\ntopic_id: {check_topic_id(topic_id, 'topic id')}".encode()
    write_atomic(fs, f"{partition_dir}/{FILE_NAME}", data)

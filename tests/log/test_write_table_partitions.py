"""``write_table``'s partition count for a new topic (no Spark): ``partitions`` when
given, else the largest ``partition`` of the rows + 1, else 1; an existing topic keeps
its count and a row outside it fails, writing nothing. Read back with kafka-python's
record parser through ``read_kp`` (an outside decoder)."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from spark_kafkalog.errors import BadRowError
from spark_kafkalog.log.write import topic_partitions
from spark_kafkalog.log.write.table import write_table
from tests.log.test_appender_util import read_kp

FS = pafs.LocalFileSystem()


def rows(parts):
    return pa.table({"value": [b"v%d" % i for i in range(len(parts))],
                     "partition": pa.array(parts, pa.int32())})


def test_new_topic_count_from_the_rows(tmp_path):
    root = str(tmp_path)
    write_table(root, "t", rows([2, 0, 2]))
    assert topic_partitions(FS, root, "t") == [0, 1, 2]
    assert [r[2] for r in read_kp(str(tmp_path / "t-2"))] == [b"v0", b"v2"]
    assert read_kp(str(tmp_path / "t-1")) == []
    write_table(root, "u", pa.table({"value": [b"x"]}))
    assert topic_partitions(FS, root, "u") == [0]
    write_table(root, "w", rows([0]), partitions=4)
    assert topic_partitions(FS, root, "w") == [0, 1, 2, 3]


def test_existing_topic_keeps_its_count(tmp_path):
    root = str(tmp_path)
    write_table(root, "t", rows([0, 1]))
    with pytest.raises(BadRowError, match=r"partition 2, outside topic 't', which has 2"):
        write_table(root, "t", rows([2]))
    assert topic_partitions(FS, root, "t") == [0, 1]
    assert [r[2] for r in read_kp(str(tmp_path / "t-1"))] == [b"v1"]

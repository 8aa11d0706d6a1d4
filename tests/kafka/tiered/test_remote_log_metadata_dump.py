"""Hand-built ``__remote_log_metadata`` values (every record type, tags, custom metadata,
and values Kafka refuses) written as a log, then dumped by Kafka 4.4's own
``kafka-dump-log --remote-log-metadata-decoder``: our ``dump_text`` prints what it
prints, record by record, error lines included. Needs Kafka's jars, no broker."""
from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa

from spark_kafkalog.format.remote_log_metadata import TOPIC, dump_text
from spark_kafkalog.log.write.table import write_table
from tests.format import remote_log_metadata_builders as b
from tests.kafka.broker import KAFKA44, dump_log_segments

VALUES = [
    b.segment(), b.segment(start=5, end=5, leader_epochs=((4, 5), (2, 5), (4, 5)),
                           custom=b"\x00" * 17, txn_empty=True, state=1),
    b.segment(txn_empty=False, extra_tags={9: b"zz"}),
    b.update(), b.update(state=2, custom=b"c"), b.update(state=3),
    b.partition_delete(), b.partition_delete(state=2),
    b.snapshot(), b.snapshot(custom=b"12", txn_empty=True, state=2),
    # refused by Kafka: each prints an error line
    b.update(state=9), b.partition_delete(state=7), b.segment(start=-1),
    b.segment(start=9, end=3), b.segment(leader_epochs=()),
    b.update() + b"\x00", b"\x01\x09\x00", b"\x00\x00\x00", b"\x03\x00\x00",
    b"\x01\x00\x01" + b.segment()[3:], b.segment()[:20],
]


def test_dump_text_equals_kafka_44(tmp_path):
    write_table(str(tmp_path), TOPIC, pa.table({"value": pa.array(VALUES, pa.binary())}),
                allow_internal_topic=True)
    files = sorted(Path(tmp_path).glob(f"{TOPIC}-0/*.log"))
    text = dump_log_segments(files, "--remote-log-metadata-decoder", "--print-data-log",
                             kafka=KAFKA44)
    kafka = {int(m.group(1)): m.group(2)
             for m in re.finditer(r"^\| offset: (\d+) .* payload: (.*)$", text, re.M)}
    ours = {i: dump_text(None, v, offset=i) for i, v in enumerate(VALUES)}
    assert ours == kafka

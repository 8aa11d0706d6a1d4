"""The tier's topics keep records whose CreateTime is past the broker's default retention.

``topics.records`` stamps some records with ``BASE_TS`` (2023). When record 0 is alone in
the first batch (the producer sends it before the next record is added: what happens on a
loaded machine), ``segment.ms=1`` gives it a segment of its own whose largest timestamp
is older than the default ``retention.ms`` (7 days), and the broker's retention check
deletes it after Kafka's consumer read it for the oracle: our reads then missed offset 0
of ``java-lz4`` (one fewer record than the oracle). Here that first batch is forced (a
producer step of its own) on the 4.4 broker, whose retention runs every second: a topic
with the broker's default retention loses offset 0 (the check ran), the tier's topic
configs (``topics.ROLL``) keep it.
"""
from __future__ import annotations

from spark_kafkalog.log import read_table
from tests.kafka.compare import differences, from_arrow
from tests.kafka.conftest import wait_for
from tests.kafka.topics import ROLL, SMALL_BATCHES, records


def test_tier_topics_keep_a_lone_old_first_batch(kafka44_broker, kafka44_tool):
    broker, tool = kafka44_broker, kafka44_tool
    recs = records(6, "lone", partitions=1)
    assert "timestamp" in recs[0] and "timestamp" not in recs[1]   # only record 0 is old
    props = {**SMALL_BATCHES, "compression.type": "lz4"}
    tier, control = "lone-tier", "lone-default"
    tool.create_topics([{"topic": tier, "partitions": 1, "configs": ROLL},
                        {"topic": control, "partitions": 1,
                         "configs": {k: v for k, v in ROLL.items() if k != "retention.ms"}}])
    # record 0 alone in one append (its own segment), then the rest; the tier topic first,
    # so every retention check that reaches the control topic's segment passed it too
    tool.produce([{"topic": t, "props": props, "records": part}
                  for t in (tier, control) for part in (recs[:1], recs[1:])])

    def first_offset(topic):
        found, _ends = tool.consume([topic])
        return min((r["offset"] for r in found), default=None)
    # the broker's retention did run: the control topic lost its lone old segment
    wait_for("the broker's retention of lone-default", lambda: first_offset(control) == 1)
    kept, ends = tool.consume([tier])
    assert [r["offset"] for r in kept] == list(range(6)), "the broker deleted offset 0"
    assert ends == {(tier, 0): 6}
    ours = from_arrow(read_table(str(broker.logdir), tier))
    assert differences(ours, kept) == []

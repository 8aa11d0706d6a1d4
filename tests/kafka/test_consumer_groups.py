"""A KIP-848 consumer group (``group.protocol=consumer``) through Apache Kafka: Kafka's
own consumer joins, reads a topic, commits and leaves; the group coordinator's records in
``__consumer_offsets`` (group and assignment epochs, member metadata, target and current
assignments, tombstones when the member leaves) decode to what Kafka's DumpLogSegments
``--offsets-decoder`` prints, line by line, and to a ``consumer_groups`` row holding the
member, its epoch and its partitions as the consumer itself reported them."""
from __future__ import annotations

import pyarrow.compute as pc

from spark_kafkalog.format.coordinator import GroupState
from spark_kafkalog.log import read_group_state, read_table
from tests.kafka.conftest import wait_for
from tests.kafka.test_consumer_offsets import same_dump

GROUP = "kip848"


def test_kip848_consumer_group_records(kafka_broker, kafka_tool, broker_topics):
    ends = broker_topics.ends["read_uncommitted"]
    topic = next(t for (t, p) in sorted(ends) if (t, 1) in ends and (t, 2) not in ends
                 and ends[(t, 0)] > 0)
    told = kafka_tool.group(GROUP, "consumer", [topic])
    member, epoch = told["memberId"], told["memberEpoch"]
    assert told["assignment"] == {f"{topic}-{p}": ends[(topic, p)] for p in (0, 1)}
    logdir = str(kafka_broker.logdir)

    def left() -> GroupState | None:
        """Every record, once the commit and the member's leaving are below the high
        watermark (the broker wrote them before the consumer's close returned)."""
        try:
            state = read_group_state(logdir, latest=False)
        except Exception:
            return None
        gone = [r for r in state.group_records().to_pylist() if r["group"] == GROUP
                and r["member_id"] == member and r["deleted"]]
        commits = [r for r in state.commits().to_pylist() if r["group"] == GROUP]
        return state if gone and len(commits) == 2 else None
    wait_for(f"group {GROUP}'s commit and leaving in __consumer_offsets",
             lambda: left() is not None)
    state = left()

    # Kafka's dump of the same segments, record by record
    files = sorted((kafka_broker.logdir / "__consumer_offsets-0").glob("*.log"))
    assert same_dump(files, "--offsets-decoder", f'"memberId":"{member}"') == []

    # the group as of its commit: the member with the epoch and partitions it was told
    at = max(r["record_offset"] for r in state.commits().to_pylist()
             if r["group"] == GROUP)
    raw = read_table(logdir, "__consumer_offsets", include_headers=False)
    before = GroupState().add(raw.filter(pc.less_equal(raw["offset"], at)))
    [row] = [r for r in before.consumer_groups().to_pylist() if r["group"] == GROUP]
    [m] = row["members"]
    # the topic's name comes from the group's commits (OffsetCommitValue v4 has its id)
    mine = [{"topic_id": told["topicIds"][topic], "topic": topic, "partitions": [0, 1]}]
    assert (m["member_id"], m["member_epoch"], m["state"], m["client_id"],
            m["subscribed_topic_names"], m["assigned_partitions"], m["target_partitions"],
            m["partitions_pending_revocation"]) == (
        member, epoch, "STABLE", f"{GROUP}-client", [topic], mine, mine, [])
    assert row["group_epoch"] == row["assignment_epoch"] == epoch
    # after it left: the group stays, with no member, at a newer epoch
    [after] = [r for r in read_group_state(logdir).consumer_groups().to_pylist()
               if r["group"] == GROUP]
    assert after["members"] == [] and after["group_epoch"] > epoch

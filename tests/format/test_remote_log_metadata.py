"""``__remote_log_metadata`` values (built by hand from Kafka's schemas) decoded into
fields, Kafka's toString text, Arrow rows and per-segment state; hostile values raise
RemoteLogMetadataError only."""
from __future__ import annotations

import pytest

from spark_kafkalog.errors import InvalidOptionError, RemoteLogMetadataError
from spark_kafkalog.format.remote_log_metadata import (
    RECORDS_SCHEMA,
    SEGMENTS_SCHEMA,
    RemoteLogMetadataState,
    decode_value,
    dump_text,
)
from spark_kafkalog.log.model.remote import RemoteLayout, RemoteSegment
from tests.format.remote_log_metadata_builders import (
    SEGMENT_ID,
    TOPIC_ID,
    partition_delete,
    segment,
    snapshot,
    tags,
    update,
)

SEG_ID_TEXT = (f"RemoteLogSegmentId{{topicIdPartition={TOPIC_ID}:orders-3, "
               f"id={SEGMENT_ID}}}")


def test_segment_metadata_text():
    value = segment(start=100, end=199, leader_epochs=((3, 150), (1, 100), (3, 160)),
                    custom=b"abc", state=0, txn_empty=True)
    assert dump_text(None, value) == (
        f"RemoteLogSegmentMetadata{{remoteLogSegmentId={SEG_ID_TEXT}, startOffset=100, "
        "endOffset=199, brokerId=1, maxTimestampMs=1700000000123, "
        "eventTimestampMs=1700000000456, segmentLeaderEpochs={1=100, 3=160}, "
        "segmentSizeInBytes=4096, customMetadata=Optional[CustomMetadata{3 bytes}], "
        "state=COPY_SEGMENT_STARTED, txnIdxEmpty=true}")


def test_absent_txn_index_tag_is_false_and_unknown_tags_are_skipped():
    value = segment(extra_tags={7: b"\x01\x02"})
    api_key, version, d = decode_value(value)
    assert (api_key, version, d["TxnIndexEmpty"]) == (0, 0, False)
    assert dump_text(None, value).endswith("customMetadata=Optional.empty, "
                                           "state=COPY_SEGMENT_STARTED, txnIdxEmpty=false}")


def test_update_delete_and_snapshot_texts():
    assert dump_text(None, update(state=2)) == (
        f"RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId={SEG_ID_TEXT}, "
        "customMetadata=Optional.empty, state=DELETE_SEGMENT_STARTED, "
        "eventTimestampMs=1700000000789, brokerId=1}")
    assert dump_text(None, partition_delete(state=1)) == (
        f"RemotePartitionDeleteMetadata{{topicPartition={TOPIC_ID}:orders-3, "
        "state=DELETE_PARTITION_STARTED, eventTimestampMs=1700000001000, brokerId=1}")
    assert dump_text(None, snapshot(txn_empty=True)) == (
        f"RemoteLogSegmentMetadataSnapshot{{segmentId={SEGMENT_ID}, startOffset=0, "
        "endOffset=9, maxTimestampMs=5, segmentLeaderEpochs={2=0}, segmentSizeInBytes=10, "
        "customMetadata=Optional.empty, state=COPY_SEGMENT_FINISHED, txnIdxEmpty=true}")


@pytest.mark.parametrize("value, reason", [
    (b"\x00\x00\x00", "frame version 0"),
    (b"\x02\x00\x00", "unknown frame version 2"),
    (b"\x01\x07\x00", "Unknown metadata id 7"),
    (b"\x01\x01\x01" + b"\x00" * 40, "Failed to deserialize record with type 1"),
    (update() + b"\x00\x00", "Found 2 byte(s) of garbage after 1"),
    (update(state=9), "state can not be null"),
    (segment(start=-1), "StartOffset for a remote segment cannot be negative"),
    (segment(start=10, end=9), "cannot be less than startOffset = 10"),
    (segment(leader_epochs=()), "segmentLeaderEpochs can not be null or empty"),
    (b"", "frame version"),
])
def test_refused_values(value, reason):
    with pytest.raises(RemoteLogMetadataError, match=reason.replace("(", r"\(")
                       .replace(")", r"\)")):
        dump_text(None, value)
    assert dump_text(None, value, offset=42).startswith("Error at offset 42, skipping. ")


@pytest.mark.parametrize("value", [segment(custom=b"xy", txn_empty=False), update(),
                                   partition_delete(), snapshot()])
def test_every_truncation_raises_our_error(value):
    for cut in range(len(value)):
        with pytest.raises(RemoteLogMetadataError):
            decode_value(value[:cut])


def _state(*values):
    st = RemoteLogMetadataState()
    for i, v in enumerate(values):
        st.add(v, 0, i, 1000 + i)
    return st


def test_segment_states():
    other = "AAAAAAAAAAAAAAAAAAAAAA"
    st = _state(segment(start=0, end=9), update(state=1),
                segment(start=10, end=19, segment=other), update(state=1, segment=other),
                update(state=2, segment=other))
    rows = st.segments().to_pylist()
    assert st.records().schema == RECORDS_SCHEMA and st.segments().schema == SEGMENTS_SCHEMA
    assert [(r["segment_id"], r["state"], r["readable"]) for r in rows] == [
        (SEGMENT_ID, "COPY_SEGMENT_FINISHED", True),
        (other, "DELETE_SEGMENT_STARTED", False)]
    assert rows[0]["metadata_offset"] == 1 and rows[0]["topic_id"] == TOPIC_ID
    st.add(update(state=3, segment=other), 0, 5, 2000)
    assert [r["segment_id"] for r in st.segments().to_pylist()] == [SEGMENT_ID]
    assert st.records().num_rows == 6


def test_a_transition_kafka_refuses_is_not_applied():
    st = _state(segment(), update(state=1), update(state=0))
    assert [r["state"] for r in st.segments().to_pylist()] == ["COPY_SEGMENT_FINISHED"]
    assert st.rejected == [(0, 2, f"segment {SEGMENT_ID}: COPY_SEGMENT_FINISHED -> "
                                  "COPY_SEGMENT_STARTED")]
    st = _state(update(state=1))            # an update of a segment never announced
    assert st.segments().num_rows == 0 and len(st.rejected) == 1


# Kafka's rules, written from RemoteLogSegmentState.isValidTransition (a state may move to
# itself; null -> COPY_SEGMENT_STARTED; STARTED -> FINISHED | DELETE_STARTED; FINISHED ->
# DELETE_STARTED; DELETE_STARTED -> DELETE_FINISHED) and RemoteLogMetadataCache: a
# segment record goes through addCopyInProgressSegment (COPY_SEGMENT_STARTED only), an
# update through updateRemoteLogSegmentMetadata (unknown segment: dropped; a valid
# move to COPY_SEGMENT_STARTED: IllegalArgumentException, not applied); a segment that
# reached DELETE_SEGMENT_FINISHED is removed (unknown from then on).
# (segment's state before, record, state the record carries) -> applied
STARTED, FINISHED, DEL_STARTED, DEL_FINISHED = range(4)
KAFKA_APPLIES = {
    (None, "segment", STARTED): True, (None, "segment", FINISHED): False,
    (None, "segment", DEL_STARTED): False, (None, "segment", DEL_FINISHED): False,
    (None, "update", STARTED): False, (None, "update", FINISHED): False,
    (None, "update", DEL_STARTED): False, (None, "update", DEL_FINISHED): False,
    (STARTED, "segment", STARTED): True, (STARTED, "segment", FINISHED): False,
    (STARTED, "segment", DEL_STARTED): False, (STARTED, "segment", DEL_FINISHED): False,
    (STARTED, "update", STARTED): False, (STARTED, "update", FINISHED): True,
    (STARTED, "update", DEL_STARTED): True, (STARTED, "update", DEL_FINISHED): False,
    (FINISHED, "segment", STARTED): False, (FINISHED, "segment", FINISHED): False,
    (FINISHED, "segment", DEL_STARTED): False, (FINISHED, "segment", DEL_FINISHED): False,
    (FINISHED, "update", STARTED): False, (FINISHED, "update", FINISHED): True,
    (FINISHED, "update", DEL_STARTED): True, (FINISHED, "update", DEL_FINISHED): False,
    (DEL_STARTED, "segment", STARTED): False, (DEL_STARTED, "segment", FINISHED): False,
    (DEL_STARTED, "segment", DEL_STARTED): False, (DEL_STARTED, "segment", DEL_FINISHED): False,
    (DEL_STARTED, "update", STARTED): False, (DEL_STARTED, "update", FINISHED): False,
    (DEL_STARTED, "update", DEL_STARTED): True, (DEL_STARTED, "update", DEL_FINISHED): True,
    # removed from the cache: a new segment record starts it again, an update is dropped
    (DEL_FINISHED, "segment", STARTED): True, (DEL_FINISHED, "segment", FINISHED): False,
    (DEL_FINISHED, "segment", DEL_STARTED): False,
    (DEL_FINISHED, "segment", DEL_FINISHED): False,
    (DEL_FINISHED, "update", STARTED): False, (DEL_FINISHED, "update", FINISHED): False,
    (DEL_FINISHED, "update", DEL_STARTED): False, (DEL_FINISHED, "update", DEL_FINISHED): False,
}
NAMES = ["COPY_SEGMENT_STARTED", "COPY_SEGMENT_FINISHED", "DELETE_SEGMENT_STARTED",
         "DELETE_SEGMENT_FINISHED"]
#: the records that bring a segment to each state (by Kafka's valid moves)
REACH = {None: [], STARTED: [segment(state=0)],
         FINISHED: [segment(state=0), update(state=1)],
         DEL_STARTED: [segment(state=0), update(state=1), update(state=2)],
         DEL_FINISHED: [segment(state=0), update(state=1), update(state=2), update(state=3)]}


def test_every_pair_of_the_transition_table_is_kafkas():
    assert len(KAFKA_APPLIES) == 5 * 2 * 4
    for (before, kind, target), applies in KAFKA_APPLIES.items():
        st = _state(*REACH[before])
        assert st.rejected == []
        record = segment(start=5, end=50, state=target) if kind == "segment" \
            else update(state=target, broker=7)
        st.add(record, 0, 99, 5000)
        rows = st.segments().to_pylist()
        case = (before, kind, target)
        if not applies:
            assert [(p, o) for p, o, _ in st.rejected] == [(0, 99)], case
            assert [r["state"] for r in rows] == ([] if before in (None, DEL_FINISHED)
                                                  else [NAMES[before]]), case
            continue
        assert st.rejected == [], case
        if target == DEL_FINISHED:
            assert rows == [], case            # the terminal state leaves the cache
            continue
        (row,) = rows
        assert (row["state"], row["metadata_offset"]) == (NAMES[target], 99), case
        # a segment record replaces the segment; an update keeps its offsets
        assert (row["start_offset"], row["end_offset"]) == \
            ((5, 50) if kind == "segment" else (0, 99)), case
        assert row["broker_id"] == (7 if kind == "update" else 1), case


def test_a_retried_deletion_is_applied():
    """The broker retries a deletion after a failover: DELETE_SEGMENT_STARTED twice is a
    self transition, which Kafka's cache applies; nothing is reported."""
    st = _state(segment(), update(state=1), update(state=2, event_ts=10),
                update(state=2, event_ts=20))
    assert st.rejected == []
    (row,) = st.segments().to_pylist()
    assert (row["state"], row["state_timestamp_ms"], row["readable"]) == (
        "DELETE_SEGMENT_STARTED", 20, False)


def test_a_partition_marked_for_deletion_is_not_readable():
    st = _state(segment(), update(state=1), partition_delete(state=0))
    (row,) = st.segments().to_pylist()
    assert (row["readable"], row["partition_delete_state"]) == (False,
                                                                "DELETE_PARTITION_MARKED")


def test_a_bad_record_names_partition_and_offset():
    st = RemoteLogMetadataState()
    with pytest.raises(RemoteLogMetadataError, match="__remote_log_metadata-4 record at "
                                                     "offset 17: state can not be null"):
        st.add(update(state=5), 4, 17, 0)


def _seg(**kw):
    base = dict(topic="orders", topic_id=TOPIC_ID, partition=3, segment_id=SEGMENT_ID,
                start_offset=11, end_offset=20, size=1, leader_epochs=((0, 11),),
                txn_index_empty=True, max_timestamp_ms=0)
    return RemoteSegment(**{**base, **kw})


def test_layouts():
    lts = RemoteLayout.parse(None)
    assert lts.object_path("/r/kafka-tiered-storage", _seg(), ".log") == (
        f"/r/kafka-tiered-storage/orders-3-{TOPIC_ID}/00000000000000000011-{SEGMENT_ID}.log")
    t = RemoteLayout.parse("{topic_id}/{partition}/{start_offset_raw}.{segment_id}{suffix}")
    assert t.object_path("bucket/p", _seg(), ".txnindex") == (
        f"bucket/p/{TOPIC_ID}/3/11.{SEGMENT_ID}.txnindex")
    for bad in ("{topic}/{partition}", "{topic}/{x}{suffix}", "/{segment_id}{suffix}",
                "../{segment_id}{suffix}", "{segment_id{suffix}"):
        with pytest.raises(InvalidOptionError, match="remoteLayout"):
            RemoteLayout.parse(bad)


def test_tags_helper_is_kafkas_layout():
    assert tags({0: b"\x01"}) == b"\x01\x00\x01\x01"

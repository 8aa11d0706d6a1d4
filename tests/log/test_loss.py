"""Records a log's own files promise and its segments do not hold are data loss
(log/read/loss.py): each shape fails a read naming partition, offsets and file, reads
what is there with fail_on_data_loss=False (one warning, the loss in the stats), and
look-alikes a broker leaves (a torn tail past the high watermark, compaction gaps,
DeleteRecords) read clean."""
import logging
import warnings

import pytest

from spark_kafkalog.errors import DataLossError
from spark_kafkalog import kcat
from spark_kafkalog.log import LogDirs, ReadStats, TornTailWarning, read_table
from spark_kafkalog.log.read.loss import find_losses

from .loss_shapes import LOSSES, NOT_LOSS, TOPIC

pytestmark = pytest.mark.filterwarnings("ignore::spark_kafkalog.log.TornTailWarning")


def cat(path: str, fail_on_data_loss: bool = True) -> int:
    """What `kafkalog cat -X isolation.level=read_uncommitted` prints of TOPIC (a count)."""
    ld = LogDirs(path)
    source = kcat.Selection(ld, [(p, None, None) for p in ld.partitions(TOPIC)])
    opts = kcat.CatOptions(program=kcat.parse_format(b"%o\n"),
                           isolation_level="read_uncommitted",
                           fail_on_data_loss=fail_on_data_loss)
    return kcat.cat([source], opts, lambda data: None, lambda: None, lambda note: None)


@pytest.mark.parametrize("shape", sorted(LOSSES))
def test_loss_fails_the_read_and_names_it(tmp_path, shape, caplog):
    kind, start, end = LOSSES[shape](tmp_path)
    with pytest.raises(DataLossError) as info:
        read_table(str(tmp_path), TOPIC)
    err = info.value
    assert f"{TOPIC}-0" in err.reason and f"offsets {start}..{end - 1} are missing" in err.reason
    assert err.offset == start and err.path.startswith(str(tmp_path))
    assert "fail_on_data_loss=False" in err.reason
    # the same loss through cat's reader
    with pytest.raises(DataLossError, match=f"offsets {start}..{end - 1}"):
        cat(str(tmp_path))
    # failOnDataLoss=false: what is there, one warning for the partition, the loss recorded
    stats = ReadStats()
    with caplog.at_level(logging.WARNING, logger="spark_kafkalog"):
        t = read_table(str(tmp_path), TOPIC, fail_on_data_loss=False, stats=stats)
    assert [(x.kind, x.start, x.end) for x in stats.losses] == [(kind, start, end)]
    assert len([r for r in caplog.records if "data loss in t-0" in r.getMessage()]) == 1
    offsets = t.column("offset").to_pylist()
    assert not any(start <= o < end for o in offsets)
    assert cat(str(tmp_path), fail_on_data_loss=False) == len(offsets)
    ld = LogDirs(str(tmp_path))
    assert [(x.kind, x.start, x.end) for x in find_losses(ld, ld.partition(TOPIC, 0))] == \
        [(kind, start, end)]


@pytest.mark.parametrize("shape", sorted(NOT_LOSS))
def test_what_a_broker_leaves_is_not_loss(tmp_path, shape):
    end = NOT_LOSS[shape](tmp_path)
    t = read_table(str(tmp_path), TOPIC)
    assert t.num_rows and max(t.column("offset").to_pylist()) < end
    ld = LogDirs(str(tmp_path))
    assert find_losses(ld, ld.partition(TOPIC, 0)) == []


def test_a_read_that_does_not_reach_the_loss_is_not_failed(tmp_path):
    LOSSES["missing_middle_segment"](tmp_path)
    t = read_table(str(tmp_path), TOPIC, ending_offsets={0: 10})
    assert t.column("offset").to_pylist() == list(range(10))
    t = read_table(str(tmp_path), TOPIC, starting_offsets={0: 20})
    assert t.column("offset").to_pylist() == list(range(20, 30))
    with pytest.raises(DataLossError, match="offsets 10..19"):
        read_table(str(tmp_path), TOPIC, starting_offsets={0: 5}, ending_offsets={0: 25})


def test_past_the_high_watermark_too(tmp_path):
    """readPastHighWatermark reads to the log end: the promise is broken all the same."""
    LOSSES["hw_past_end"](tmp_path)
    with pytest.raises(DataLossError, match="high watermark is checkpointed at 30"):
        read_table(str(tmp_path), TOPIC, read_past_high_watermark=True)


def test_real_broker_logs_hold_no_loss(real_broker):
    """Real brokers' log dirs, compacted __consumer_offsets (offsets jumping between
    segments under a cleaner checkpoint) included, show no loss."""
    seen = 0
    for root in sorted(x for x in real_broker.iterdir() if x.is_dir()):
        ld = LogDirs(str(root), include_internal=True)
        for topic in ld.topics():
            for p in ld.partitions(topic):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", TornTailWarning)
                    assert find_losses(ld, p) == [], p.path
                seen += 1
    assert seen >= 20


def test_a_log_start_advanced_after_the_snapshot_is_not_loss(tmp_path):
    """A reader took the log start checkpoint (5) before its listing; meanwhile retention
    advanced it to 10 and removed segment 0 (checkpoint first, then the files, as
    retention.py and Kafka do). Against the file read afresh it is deletion, not loss: the
    read is the suffix from 10. A checkpoint that still says 5 on disk stays loss."""
    from spark_kafkalog.log import LOG_START_OFFSET_CHECKPOINT
    from spark_kafkalog.log.read.loss import checkpoint_losses

    from .loss_shapes import _build, _checkpoint, _files

    _b, p, d = _build(tmp_path, log_start=5)
    logdirs = LogDirs(str(tmp_path))
    assert logdirs.checkpoint(str(tmp_path), LOG_START_OFFSET_CHECKPOINT) == {(TOPIC, 0): 5}
    _checkpoint(tmp_path, LOG_START_OFFSET_CHECKPOINT, 10)      # retention, step 1
    for f in _files(d, 0):                                     # step 2
        f.unlink()
    part = LogDirs(str(tmp_path)).partitions(TOPIC)[0]         # the listing, after
    assert part.segments[0].base_offset == 10
    assert checkpoint_losses(logdirs, part, 30) == ()
    # the same listing against a file that still says 5: the segments below 10 are lost
    _checkpoint(tmp_path, LOG_START_OFFSET_CHECKPOINT, 5)
    [loss] = checkpoint_losses(logdirs, part, 30)
    assert (loss.kind, loss.start, loss.end) == ("log_start_below", 5, 10)


def test_a_gap_below_the_log_start_read_afresh_is_not_loss(tmp_path):
    """A listing that shows segment 0 holding nothing (its file renamed for deletion
    after the directory was read) and segment 10 next: a gap 0..9. When the log start
    checkpoint, read afresh, is at 10 or past it, retention deleted those offsets after
    the read's snapshot: not loss. At 5 (below the gap's end) or absent it is a gap."""
    from dataclasses import replace

    from spark_kafkalog.log import LOG_START_OFFSET_CHECKPOINT
    from spark_kafkalog.log.read.loss import gap_loss

    from .loss_shapes import _build, _checkpoint

    _build(tmp_path)
    logdirs = LogDirs(str(tmp_path))
    part = logdirs.partitions(TOPIC)[0]
    empty = replace(part, segments=(replace(part.segments[0], size=0),)
                    + part.segments[1:])
    for start, lost in ((None, True), (5, True), (10, False), (20, False)):
        _checkpoint(tmp_path, LOG_START_OFFSET_CHECKPOINT, start)
        loss = gap_loss(logdirs, empty, 0, None, 1, None)
        assert (loss is not None) == lost, start
        if lost:
            assert (loss.kind, loss.start, loss.end) == ("gap", 0, 10)
            assert "holds no batch" in loss.message

"""The remote tier (KIP-405) of partitions, for inspect and verify: per partition its
readable remote segments (from ``__remote_log_metadata``), and what is wrong with them.

Checks (kind ``remote`` unless said): a root that holds no object of the segments listed
(the wrong directory: one finding naming it, instead of one per object); offsets neither
tier holds between the log start and the local log (data loss); a segment's objects
missing from the store (the ``.log``, ``.index``, ``.timeindex``, ``.snapshot``,
``.leader_epoch_checkpoint``, and the ``.txnindex`` the metadata says is not empty); a
``.log`` whose size is not the metadata's; leader epochs (kind ``leader_epoch``) outside
a segment's offsets, or going back from one segment to the next; metadata updates Kafka
would refuse (kind ``remote_metadata``, a warning). One ``get_file_info`` per segment (a
listing only when the first segment is missing, to tell a wrong root from lost ones).
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow.fs as pafs

from spark_kafkalog.log.diagnose.findings import ERROR, WARNING, Finding
from spark_kafkalog.log.read.discovery import LogDirs
from spark_kafkalog.log.read.reader import load_remote_metadata
from spark_kafkalog.log.read.remote import (
    RemoteStorage,
    check_root,
    remote_segments,
    root_problem,
)
from spark_kafkalog.log.read.seek import log_start_offset
from spark_kafkalog.log.read.tiered import TierPlan, plan_partition

__all__ = ["RemoteSummary", "remote_tiers", "root_finding", "verify_remote"]

_REQUIRED = (".log", ".index", ".timeindex", ".snapshot", ".leader_epoch_checkpoint")


@dataclass(frozen=True)
class RemoteSummary:
    """One partition's remote tier, as inspect prints it."""
    topic: str
    partition: int
    plan: TierPlan

    def to_dict(self) -> dict:
        p = self.plan
        return {"remote_segments": len(p.remote),
                "remote_bytes": sum(s.size for s in p.remote),
                "log_start_offset": p.log_start, "local_log_start_offset": p.local_start,
                "remote_end_offset": p.remote_end if p.remote else None,
                "gap": list(p.gap) if p.gap else None}


def remote_tiers(logdirs: LogDirs, storage: RemoteStorage, parts, state=None, *,
                 option: str | None = None) -> dict[tuple[str, int], RemoteSummary]:
    """(topic, partition) -> RemoteSummary of the local PartitionDirs ``parts``. With
    ``option`` (the root's option as the user typed it), a root holding none of the
    segments to read raises InvalidOptionError naming it (:func:`~..read.remote.check_root`)."""
    state = state if state is not None else load_remote_metadata(logdirs)
    by_topic = {t: remote_segments(state, t) for t in {p.topic for p in parts}}
    out = {}
    for p in parts:
        plan = plan_partition(p.topic, p.partition, by_topic[p.topic].get(p.partition, []),
                              log_start_offset(logdirs, p),
                              logdirs.checkpointed_log_start_offset(p))
        out[(p.topic, p.partition)] = RemoteSummary(p.topic, p.partition, plan)
    if option is not None:
        check_root(storage, [s for t in out.values() for s in t.plan.remote], option)
    return out


def root_finding(storage: RemoteStorage, tiers: dict, option: str) -> Finding | None:
    """An error finding when the root holds none of the segments of ``tiers``
    (:func:`remote_tiers`' answer), naming ``option`` and where they are (None when it
    holds them)."""
    err = root_problem(storage, [s for t in tiers.values() for s in t.plan.remote], option)
    return None if err is None else Finding(ERROR, "remote", storage.uri, None, None,
                                            err.reason)


def held_remotely(findings: list[Finding], logdirs: LogDirs, storage: RemoteStorage,
                  parts) -> list[Finding]:
    """``findings`` without the data loss of a log start checkpointed below the local log
    of a partition that has a remote tier: a broker with tiered storage checkpoints the
    log start over both tiers, and the remote tier holds those offsets (its own gaps and
    missing objects :func:`verify_remote` reports)."""
    tiered = {f"{t}-{q}: the log start offset is checkpointed at"
              for (t, q) in remote_tiers(logdirs, storage, parts)}
    return [f for f in findings if not (f.kind == "data_loss" and any(
        f.message.startswith(prefix) for prefix in tiered))]


def verify_remote(logdirs: LogDirs, storage: RemoteStorage, parts,
                  option: str = "--remote-storage") -> list[Finding]:
    """Findings about the remote tier of ``parts`` (local PartitionDirs); ``option``:
    the root's option, named when the root is the wrong directory."""
    state = load_remote_metadata(logdirs)
    out = [Finding(WARNING, "remote_metadata", f"__remote_log_metadata-{part}", None, off,
                   f"an update Kafka refuses was not applied: {why}")
           for part, off, why in state.rejected]
    tiers = remote_tiers(logdirs, storage, parts, state)
    wrong_root = root_finding(storage, tiers, option)
    if wrong_root is not None:
        return out + [wrong_root]
    for (topic, partition), summary in tiers.items():
        plan = summary.plan

        def finding(kind, path, offset, message, severity=ERROR):
            out.append(Finding(severity, kind, path, None, offset, message, topic, partition))

        if plan.gap is not None:
            finding("remote", storage.uri, plan.gap[0],
                    f"offsets {plan.gap[0]}..{plan.gap[1] - 1} are in neither tier (log start "
                    f"{plan.log_start}, local log start {plan.local_start}): data loss")
        prev_epoch = None
        for seg in plan.remote:
            wanted = _REQUIRED + (() if seg.txn_index_empty else (".txnindex",))
            paths = [storage.path(seg, s) for s in wanted]
            for info in storage.filesystem.get_file_info(paths):
                if info.type == pafs.FileType.NotFound:
                    finding("remote", info.path, seg.start_offset,
                            f"remote segment {seg.segment_id} (offsets {seg.start_offset}.."
                            f"{seg.end_offset}) lacks this object, which the metadata lists")
                elif info.path == paths[0] and info.size != seg.size:
                    finding("remote", info.path, seg.start_offset,
                            f"remote segment {seg.segment_id} is {info.size} bytes, the "
                            f"metadata says {seg.size}")
            for epoch, offset in seg.leader_epochs:
                if not seg.start_offset <= offset <= seg.end_offset:
                    finding("leader_epoch", paths[0], offset,
                            f"leader epoch {epoch} starts at {offset}, outside the segment's "
                            f"offsets {seg.start_offset}..{seg.end_offset}")
                if prev_epoch is not None and epoch < prev_epoch:
                    finding("leader_epoch", paths[0], offset,
                            f"leader epoch {epoch} follows epoch {prev_epoch}: epochs go back")
                prev_epoch = epoch
    return out

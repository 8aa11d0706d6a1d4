#!/usr/bin/env python
"""Decode a log dir's consumer offsets and groups, or carry them over to a copy.

Reads ``__consumer_offsets`` (and ``__transaction_state`` when present) of a broker's log
dir with the spark_kafkalog library (no broker, no Spark session needed: the internal
topics are small) and writes, under ``--output``:

    commits.parquet       group, topic, partition, offset (the next one the group reads),
                          leader_epoch, metadata, commit/expire timestamps, topic_id
    groups.parquet        classic groups: protocol type, protocol, generation, leader,
                          members with their subscriptions and assignments
    consumer_groups.parquet
                          KIP-848 consumer groups (group.protocol=consumer): group and
                          assignment epochs, regex subscriptions, members with their
                          epochs, state, assigned/pending/target partitions
    group_records.parquet every record of Kafka 4's group types (consumer, share and
                          streams groups): name, group, member, key and value as JSON
    transactions.parquet  transactional id, producer id/epoch, state, partitions
    other_records.parquet record types or versions this build cannot decode, counted

(``--format json``: JSON lines, ``.jsonl``). By default the latest state per key
(tombstones delete); ``--as-of TIME`` the state at that time; ``--all-records`` every
record, in log order.

With ``--translate MAPPING``, MAPPING is the offset map ``jobs/copy_topic.py
--offset-map`` wrote (Parquet: ``topic, partition, offset, new_topic, new_partition,
new_offset``, one row per copied record) and the job writes, per group,
``<out>/<group>.csv``: the lines ``topic,partition,offset`` that
``kafka-consumer-groups.sh --reset-offsets --from-file`` takes, so each group resumes on
the copy at the first record it had not consumed. A group whose committed position is a
record the copy left out (a time window, compaction) resumes at the next record that
exists; the job says so on stderr and in the summary.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from typing import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from spark_kafkalog import jobkit
from spark_kafkalog.jobs import _preflight, _replace
from spark_kafkalog.errors import LogLayoutError, storage_errors
from spark_kafkalog.log import read_group_state, read_transaction_state
from spark_kafkalog.log.io import fsync_dir, fsync_file

MAPPING_COLUMNS = ("topic", "partition", "offset", "new_topic", "new_partition",
                   "new_offset")
#: rows of the offset map read at a time (bounded memory)
MAPPING_BATCH_ROWS = 1 << 20


def build_parser() -> jobkit.JobParser:
    ap = jobkit.parser(
        "consumer_offsets", __doc__,
        example="kafkalog job consumer_offsets --path /var/lib/kafka/data "
                "--translate /backup/orders-map --output /backup/group-offsets\n"
                "  kafkalog job consumer_offsets --path /var/lib/kafka/data "
                "--output /tmp/offsets --format json --as-of 2024-05-01T12:00:00Z")
    jobkit.add_log_dirs(ap, "log dir(s) holding __consumer_offsets")
    ap.add_argument("--output", dest="out", required=True,
                    help="output directory (created; files in it are replaced)")
    ap.add_argument("--format", choices=("parquet", "json"), default="parquet",
                    help="table format (default parquet; json = JSON lines)")
    ap.add_argument("--as-of", metavar="TIME",
                    help="state as of this time (epoch ms or ISO-8601): records written "
                         "later are ignored")
    ap.add_argument("--all-records", action="store_true",
                    help="every record in log order instead of the latest state per key")
    jobkit.add_isolation_level(ap, "read_committed (default) leaves out aborted "
                                   "transactional offset commits, as the group coordinator "
                                   "does")
    ap.add_argument("--translate", metavar="MAPPING",
                    help="offset map of jobs/copy_topic.py (--offset-map): write "
                         "<out>/<group>.csv for kafka-consumer-groups.sh --from-file")
    ap.add_argument("--group", action="append", metavar="GROUP",
                    help="only this group (repeatable)")
    jobkit.add_fs_option(ap)
    jobkit.alias(ap, "--out", "--output")
    return ap


def parse_args(argv=None) -> argparse.Namespace:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.translate and args.all_records:
        ap.error("--translate works on the latest state: drop --all-records")
    return args


def _progress(enabled: bool):
    def say(line: str) -> None:
        print(f"consumer_offsets: {line}", file=sys.stderr, flush=True)
    return say if enabled else None


# ---- output files ---------------------------------------------------------------------------

OUTPUT_TABLES = ("commits", "groups", "consumer_groups", "group_records", "other_records",
                 "transactions")


def is_output_file(name: str) -> bool:
    """A name this job writes under ``--output`` (a table or a group's CSV)."""
    stem, dot, ext = name.rpartition(".")
    return bool(dot) and ((stem in OUTPUT_TABLES and ext in ("parquet", "jsonl"))
                          or ext == "csv")


class _Output:
    """The job's output directory, replaced whole: files go to a staging directory beside
    ``--output`` (``jobs/_replace.py``'s names), each fsynced, and the staging directory
    is renamed over the old output when every file is written. A failed or killed run
    leaves the old output (its staging directory is removed by the next run)."""

    def __init__(self, out: str):
        self.out = out.rstrip("/") or out
        self.files = _replace.LocalFiles()
        self.recovered = _replace.recover(self.files, self.out)
        self.run_id = _replace.new_run_id()
        self.staging = _replace.sibling(self.out, _replace.NEW, self.run_id)
        with storage_errors("create directory", self.staging):
            os.makedirs(os.path.dirname(os.path.abspath(self.out)), exist_ok=True)
            os.mkdir(self.staging)

    def write(self, name: str, write) -> str:
        """Write ``name`` with ``write(path)`` and fsync it (the staging directory is read
        by nobody, so no file of it needs its own rename); returns where it will be once
        swapped in."""
        path = os.path.join(self.staging, name)
        # pyarrow's Parquet writer or a text file's: a full disk or an I/O error is the
        # one rule's StorageError naming the file (exit 4), not a bare OSError
        with storage_errors("write", path):
            write(path)
        fsync_file(path)
        return os.path.join(self.out, name)

    def commit(self) -> None:
        fsync_dir(self.staging)
        _replace.swap_in(self.files, self.out, self.staging, self.run_id)
        fsync_dir(os.path.dirname(os.path.abspath(self.out)))

    def abandon(self) -> None:
        self.files.delete(self.staging)


def _json_default(value):
    if isinstance(value, (bytes, bytearray)):
        import base64
        return base64.b64encode(value).decode("ascii")
    raise TypeError(type(value).__name__)


def write_table(table: pa.Table, out: _Output, name: str, fmt: str) -> str:
    if fmt == "parquet":
        import pyarrow.parquet as pq
        return out.write(f"{name}.parquet", lambda p: pq.write_table(table, p))

    def write(p):
        with open(p, "w", encoding="utf-8") as fh:
            for row in table.to_pylist():
                fh.write(json.dumps(row, ensure_ascii=False, default=_json_default))
                fh.write("\n")
    return out.write(f"{name}.jsonl", write)


def group_file_name(group: str) -> str:
    """A file name for ``group``: characters unsafe in a file name are %-escaped."""
    safe = re.sub(r"[^A-Za-z0-9._-]", lambda m: "".join(f"%{b:02X}" for b in
                                                        m.group().encode()), group)
    return f"{safe or '%00'}.csv"


# ---- translation ----------------------------------------------------------------------------

class _Translation:
    """Per group: the committed offsets on the old log, and what the offset map says of
    them, merged batch by batch."""

    def __init__(self, commits: dict[str, dict[tuple[str, int], int]]):
        self.commits = commits
        # group -> (new_topic, new_partition) -> [min unconsumed new offset, max new offset]
        self.new: dict[str, dict[tuple[str, int], list]] = {g: {} for g in commits}
        # group -> (topic, partition) -> [mapped at the commit?, min offset, max offset,
        #                                  first mapped offset >= commit]
        self.old: dict[str, dict[tuple[str, int], list]] = {g: {} for g in commits}
        self.tables = {}
        for g, c in commits.items():
            items = sorted(c.items())
            self.tables[g] = (sorted({t for t, _p in c}), pa.table({
                "topic": pa.array([t for (t, _p), _o in items], pa.string()),
                "partition": pa.array([p for (_t, p), _o in items], pa.int32()),
                "committed": pa.array([o for _k, o in items], pa.int64())}))

    def add(self, batch: pa.Table) -> None:
        for g, (topics, committed) in self.tables.items():
            sub = batch.filter(pc.is_in(batch["topic"], value_set=pa.array(topics)))
            if sub.num_rows == 0:
                continue
            sub = sub.join(committed, keys=["topic", "partition"], join_type="left outer")
            consumed = pc.fill_null(pc.less(sub["offset"], sub["committed"]), False)
            unconsumed_new = pc.if_else(consumed, pa.scalar(None, pa.int64()),
                                        sub["new_offset"])
            agg = pa.table({"t": sub["new_topic"], "p": sub["new_partition"],
                            "u": unconsumed_new, "n": sub["new_offset"]}).group_by(
                ["t", "p"], use_threads=False).aggregate([("u", "min"), ("n", "max")])
            acc = self.new[g]
            for t, p, u, n in zip(*(agg[c].to_pylist() for c in ("t", "p", "u_min",
                                                                 "n_max"))):
                cur = acc.setdefault((t, p), [None, None])
                cur[0] = u if cur[0] is None else (cur[0] if u is None else min(cur[0], u))
                cur[1] = n if cur[1] is None else max(cur[1], n)
            at = pc.fill_null(pc.equal(sub["offset"], sub["committed"]), False)
            after = pc.if_else(pc.fill_null(pc.greater_equal(sub["offset"],
                                                             sub["committed"]), False),
                               sub["offset"], pa.scalar(None, pa.int64()))
            agg = pa.table({"t": sub["topic"], "p": sub["partition"],
                            "a": pc.cast(at, pa.int64()), "o": sub["offset"],
                            "f": after}).group_by(["t", "p"], use_threads=False).aggregate(
                [("a", "max"), ("o", "min"), ("o", "max"), ("f", "min")])
            acc = self.old[g]
            for t, p, a, lo, hi, f in zip(*(agg[c].to_pylist() for c in (
                    "t", "p", "a_max", "o_min", "o_max", "f_min"))):
                cur = acc.setdefault((t, p), [False, lo, hi, f])
                cur[0] = cur[0] or bool(a)
                cur[1] = min(cur[1], lo)
                cur[2] = max(cur[2], hi)
                cur[3] = f if cur[3] is None else (cur[3] if f is None else min(cur[3], f))

    def redelivered(self, batch: pa.Table, positions: dict[str, dict[tuple[str, int], int]],
                    counts: dict[str, int]) -> None:
        """Add to ``counts[group]`` the records the group had consumed that sit at or
        after its new position (re-partitioning interleaves old partitions, so a group
        resuming at its first unconsumed record reads them again)."""
        for g, (topics, committed) in self.tables.items():
            pos = positions.get(g)
            if not pos:
                continue
            sub = batch.filter(pc.is_in(batch["topic"], value_set=pa.array(topics)))
            if sub.num_rows == 0:
                continue
            sub = sub.join(committed, keys=["topic", "partition"], join_type="left outer")
            items = sorted(pos.items())
            at = pa.table({"new_topic": pa.array([t for (t, _p), _o in items], pa.string()),
                           "new_partition": pa.array([p for (_t, p), _o in items],
                                                     pa.int32()),
                           "position": pa.array([o for _k, o in items], pa.int64())})
            sub = sub.join(at, keys=["new_topic", "new_partition"], join_type="inner")
            again = pc.and_(pc.fill_null(pc.less(sub["offset"], sub["committed"]), False),
                            pc.greater_equal(sub["new_offset"], sub["position"]))
            counts[g] = counts.get(g, 0) + pc.sum(pc.cast(again, pa.int64())).as_py() or 0

    def result(self, group: str) -> tuple[list[tuple[str, int, int]], list[str]]:
        """``([(new_topic, new_partition, offset)], notes)`` of one group."""
        rows = []
        for (t, p), (unconsumed, last) in sorted(self.new[group].items()):
            rows.append((t, p, unconsumed if unconsumed is not None else last + 1))
        notes = []
        for (t, p), c in sorted(self.commits[group].items()):
            info = self.old[group].get((t, p))
            if info is None:
                notes.append(f"group {group}: {t}-{p} committed {c}, but the copy holds no "
                             f"record of {t}-{p}")
                continue
            exact, lo, hi, first_after = info
            if exact or c == hi + 1:
                continue
            if first_after is None:
                notes.append(f"group {group}: {t}-{p} committed {c}, past the last copied "
                             f"record ({hi}): it had consumed records the copy left out "
                             "and resumes at the end of the copy")
            else:
                notes.append(f"group {group}: {t}-{p} committed {c}, a record the copy "
                             f"left out: it resumes at the next copied record, old "
                             f"offset {first_after}")
        return rows, notes


def _write_csv(path: str, rows) -> None:
    """``topic,partition,offset`` lines, as kafka-consumer-groups.sh --from-file reads."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(f"{t},{p},{o}\n" for t, p, o in rows)


def read_mapping(path: str, progress) -> Iterable[pa.Table]:
    import pyarrow.dataset as ds

    try:
        # Spark writes _SUCCESS/.crc files (ignored) and may partition by column dirs
        dataset = ds.dataset(path, format="parquet", partitioning="hive")
    except (FileNotFoundError, pa.ArrowInvalid) as err:
        raise jobkit.JobInputError(f"--translate {path}: not a Parquet offset map "
                                   f"({err})") from None
    missing = [c for c in MAPPING_COLUMNS if c not in dataset.schema.names]
    if missing:
        raise jobkit.JobInputError(f"--translate {path}: the offset map has no column(s) "
                                   f"{', '.join(missing)} (expected "
                                   f"{', '.join(MAPPING_COLUMNS)})")
    types = {"topic": pa.string(), "partition": pa.int32(), "offset": pa.int64(),
             "new_topic": pa.string(), "new_partition": pa.int32(),
             "new_offset": pa.int64()}
    rows = 0
    for rb in dataset.to_batches(columns=list(MAPPING_COLUMNS),
                                 batch_size=MAPPING_BATCH_ROWS):
        table = pa.Table.from_batches([rb]).cast(pa.schema(
            [pa.field(c, types[c]) for c in MAPPING_COLUMNS]))
        rows += table.num_rows
        if progress:
            progress(f"offset map: {rows:,} rows")
        yield table


def translate(commits: pa.Table, mapping: str, out: _Output, progress) -> dict:
    by_group: dict[str, dict[tuple[str, int], int]] = {}
    for g, t, p, o in zip(*(commits[c].to_pylist() for c in ("group", "topic",
                                                              "partition", "offset"))):
        by_group.setdefault(g, {})[(t, p)] = o
    tr = _Translation(by_group)
    rows = 0
    for table in read_mapping(mapping, progress):
        rows += table.num_rows
        tr.add(table)
    results = {g: tr.result(g) for g in sorted(by_group)}
    positions = {g: {(t, p): o for t, p, o in rows} for g, (rows, _n) in results.items()}
    again: dict[str, int] = {}
    if any(tr.new[g] for g in by_group):
        for table in read_mapping(mapping, None):     # second pass: what is read again
            tr.redelivered(table, positions, again)
    groups, notes, partitions = {}, [], 0
    for g, (result, group_notes) in results.items():
        if again.get(g):
            group_notes = group_notes + [
                f"group {g}: {again[g]} records it had consumed come after its new "
                "positions (the copy interleaved old partitions) and will be read again"]
        for line in group_notes:
            print(f"consumer_offsets: {line}", file=sys.stderr, flush=True)
        notes.extend(group_notes)
        if not result:
            continue
        path = out.write(group_file_name(g), lambda tmp, rows=result: _write_csv(tmp, rows))
        groups[g] = {"file": path, "partitions": len(result),
                     "redelivered": again.get(g, 0)}
        partitions += len(result)
    return {"groups": groups, "notes": notes, "mapping_rows": rows,
            "partitions": partitions}


def _write(args, out: _Output, summary: dict, state, commits, other, tstate, progress,
           t0: float) -> str:
    """Write the tables (or the translated CSVs) into ``out``; returns the summary line."""
    if args.translate:
        summary.update(translated=translate(commits, args.translate, out, progress))
        summary["seconds"] = round(time.perf_counter() - t0, 3)
        tr = summary["translated"]
        line = (f"translated {jobkit.plural(len(tr['groups']), 'group')} "
                f"({jobkit.plural(tr['partitions'], 'partition')}) through "
                f"{tr['mapping_rows']:,} mapped records into {args.out} in "
                f"{summary['seconds']:.1f}s")
        if tr["notes"]:
            line += f"; {jobkit.plural(len(tr['notes']), 'note')} on stderr"
    else:
        groups = state.groups()
        modern = state.consumer_groups()
        records = state.group_records()
        if args.group:
            wanted = pa.array(args.group)
            groups = groups.filter(pc.is_in(groups["group"], value_set=wanted))
            modern = modern.filter(pc.is_in(modern["group"], value_set=wanted))
            records = records.filter(pc.is_in(records["group"], value_set=wanted))
        files = {"commits": write_table(commits, out, "commits", args.format),
                 "groups": write_table(groups, out, "groups", args.format),
                 "consumer_groups": write_table(modern, out, "consumer_groups",
                                                args.format),
                 "group_records": write_table(records, out, "group_records",
                                              args.format),
                 "other_records": write_table(other, out, "other_records",
                                              args.format)}
        txns = 0
        if tstate is not None:
            table = tstate.transactions()
            txns = table.num_rows
            files["transactions"] = write_table(table, out, "transactions",
                                                args.format)
        summary.update(files=files, group_rows=groups.num_rows,
                       consumer_groups=modern.num_rows, transactions=txns,
                       seconds=round(time.perf_counter() - t0, 3))
        what = "records" if args.all_records else "latest state"
        line = (f"decoded {state.records:,} __consumer_offsets records ({what}): "
                f"{jobkit.plural(commits.num_rows, 'committed offset')}, "
                f"{jobkit.plural(groups.num_rows, 'group')}, "
                f"{jobkit.plural(modern.num_rows, 'consumer group')} (KIP-848), "
                f"{jobkit.plural(txns, 'transaction')} into {args.out} in "
                f"{summary['seconds']:.1f}s")
        skipped = sum(summary["other_record_types"].values())
        if skipped:
            line += f"; {jobkit.plural(skipped, 'record')} of other types counted"
    return line


# ---- main -----------------------------------------------------------------------------------

def main(argv=None) -> int:
    args = parse_args(argv)
    progress = _progress(args.progress)
    as_of = jobkit.parse_time_ms(args.as_of, "--as-of") if args.as_of else None
    fs_options = jobkit.parse_kv(args.fs_option, "--fs-option")
    _preflight.consumer_offsets(args, fs_options, is_output_file)
    t0 = time.perf_counter()
    state = read_group_state(args.path, latest=not args.all_records, as_of=as_of,
                             isolation_level=args.isolation_level,
                             filesystem_options=fs_options, progress=progress)
    commits = state.commits()
    if args.group:
        commits = commits.filter(pc.is_in(commits["group"], value_set=pa.array(args.group)))
    other = state.other_records()
    summary = {"path": args.path, "out": args.out, "as_of": args.as_of,
               "records": state.records, "partitions": len(state.partitions),
               "bytes": state.bytes_read,
               "first_timestamp": jobkit.iso_ms(state.first_timestamp)
               if state.first_timestamp is not None else None,
               "last_timestamp": jobkit.iso_ms(state.last_timestamp)
               if state.last_timestamp is not None else None,
               "commits": commits.num_rows,
               "groups": len(set(commits["group"].to_pylist())),
               "record_types": {r["name"]: r["records"]
                                for r in state.record_types().to_pylist()},
               "other_record_types": {r["name"]: r["records"] for r in other.to_pylist()}}
    tstate = None
    if not args.translate:              # read everything before anything is written
        try:
            tstate = read_transaction_state(args.path, latest=not args.all_records,
                                            as_of=as_of, isolation_level=args.isolation_level,
                                            filesystem_options=fs_options,
                                            progress=progress)
        except LogLayoutError:
            tstate = None               # no __transaction_state in these log dirs
    out = _Output(args.out)
    for line in out.recovered:
        print(f"consumer_offsets: {line}", file=sys.stderr, flush=True)
    try:
        line = _write(args, out, summary, state, commits, other, tstate, progress, t0)
    except BaseException:
        out.abandon()
        raise
    out.commit()
    summary["records_per_second"] = jobkit.rate(state.records, summary["seconds"])
    line += (f" (read {jobkit.plural(summary['partitions'], 'partition')}, "
             f"{jobkit.human_bytes(state.bytes_read)}, {summary['first_timestamp']} .. "
             f"{summary['last_timestamp']}"
             + jobkit.rate_text(state.records, summary["seconds"], "records", ", ", "")
             + ")")
    jobkit.emit(summary, line, args.summary_json)
    return 0


if __name__ == "__main__":
    sys.exit(jobkit.run("consumer_offsets", main))

"""Manifests of log dirs: what a backup must hold, so a copy can be proven whole.

:func:`build_manifest` describes log dirs file by file: every file of each partition
dir (segments, indexes, producer snapshots, ``leader-epoch-checkpoint``, ...) and the
roots' other files (``meta.properties``, our journals) with size and SHA-256 (streamed
in :data:`CHUNK` pieces: bounded memory); a segment also with its batches, data records,
offset and time range; an offset/time index with its entries and their offset or time
range. Per partition: its entry in each root checkpoint file and its leader epochs
(the root checkpoint files themselves change with every partition: their entries are
compared, not their bytes). :func:`check_manifest` compares a copy with a manifest and
reports each difference as a finding: a file missing, truncated (shorter), altered (same
size or longer, other bytes), or extra; a checkpoint entry that differs. Paths are
relative to their root (roots matched by position), so a copy may live anywhere.
"""
from __future__ import annotations

import hashlib
import json
import time
import warnings
from typing import Iterable

import pyarrow.fs as pafs

from spark_kafkalog.errors import KafkaLogError, LogLayoutError
from spark_kafkalog.log.diagnose.findings import ERROR, Finding
from spark_kafkalog.log.diagnose.inspect import inspect_partition
from spark_kafkalog.log.files.index import read_offset_index, read_time_index
from spark_kafkalog.log.io import join, list_dir, read_range, write_atomic
from spark_kafkalog.log.model import PartitionDir
from spark_kafkalog.log.read.discovery import LogDirs
from spark_kafkalog.log.read.scan import TornTailWarning

__all__ = ["MANIFEST_FORMAT", "build_manifest", "write_manifest", "read_manifest",
           "check_manifest", "file_sha256"]

MANIFEST_FORMAT = "kafkalog-manifest/1"
#: bytes hashed at a time
CHUNK = 8 * 1024 * 1024
#: root files that are not part of the log (locks) or compared entry by entry
_ROOT_SKIP = (".lock", ".kafkalog.lock")
_ROOT_CHECKPOINTS = ("replication-offset-checkpoint", "recovery-point-offset-checkpoint",
                     "log-start-offset-checkpoint", "cleaner-offset-checkpoint")


def file_sha256(fs: pafs.FileSystem, path: str, size: int) -> str:
    """SHA-256 of the first ``size`` bytes of a file, read :data:`CHUNK` at a time."""
    h = hashlib.sha256()
    pos = 0
    while pos < size:
        data = read_range(fs, path, pos, min(CHUNK, size - pos))
        if not data:
            break
        h.update(data)
        pos += len(data)
    return h.hexdigest()


def _file_entry(fs, path: str, size: int) -> dict:
    return {"size": size, "sha256": file_sha256(fs, path, size)}


def _partition_entries(logdirs: LogDirs, p: PartitionDir, ri: int) -> tuple[dict, dict]:
    """``(files, partition)``: the partition dir's files (relative paths) and its
    checkpoint entries and leader epochs."""
    fs = logdirs.filesystem
    name = p.path.rstrip("/").rsplit("/", 1)[-1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornTailWarning)
        info = inspect_partition(logdirs, p, scan=True, verify_crc=False,
                                 decode_records=True)
    seg_info = {s.path: s for s in info.segments}
    files: dict = {}
    for i in list_dir(fs, p.path):
        if i.type != pafs.FileType.File:
            continue
        entry = {"root": ri, **_file_entry(fs, i.path, int(i.size or 0))}
        s = seg_info.get(i.path)
        if s is not None:
            entry.update(kind="segment", batches=s.batches, records=s.data_records,
                         first_offset=s.first_offset, last_offset=s.last_offset,
                         min_timestamp=s.min_timestamp, max_timestamp=s.max_timestamp)
        entry.update(_index_facts(fs, p, i.path))
        files[f"{name}/{i.base_name}"] = entry
    part = {"root": ri, "checkpoints": dict(info.checkpoints),
            "leader_epochs": [list(e) for e in info.leader_epochs]}
    return files, part


def _index_facts(fs, p: PartitionDir, path: str) -> dict:
    for k, seg in enumerate(p.segments):
        nxt = p.next_base_offset(k)
        try:
            if path == seg.index_path:
                idx = read_offset_index(fs, path, seg.base_offset, segment_size=seg.size,
                                        next_base_offset=nxt)
                offs = idx.offsets if idx is not None else ()
                return {"kind": "index", "entries": len(offs),
                        "first_offset": int(offs[0]) if len(offs) else None,
                        "last_offset": int(offs[-1]) if len(offs) else None}
            if path == seg.timeindex_path:
                idx = read_time_index(fs, path, seg.base_offset, next_base_offset=nxt)
                ts = idx.timestamps if idx is not None else ()
                return {"kind": "timeindex", "entries": len(ts),
                        "min_timestamp": int(ts[0]) if len(ts) else None,
                        "max_timestamp": int(ts[-1]) if len(ts) else None}
        except KafkaLogError as err:
            return {"kind": "index", "unreadable": err.reason}
    return {}


def build_manifest(logdirs: LogDirs, partitions: Iterable[PartitionDir] | None = None
                   ) -> dict:
    """The manifest of ``partitions`` (default: every partition, internal ones too) and
    of their roots' files (see the module docstring). Reads every file once to hash it
    and each segment's batch headers once more."""
    fs = logdirs.filesystem
    parts = list(partitions) if partitions is not None else logdirs.all_partitions()
    root_index = {r: i for i, r in enumerate(logdirs.roots)}
    files: dict = {}
    partitions_out: dict = {}
    for p in parts:
        got, part = _partition_entries(logdirs, p, root_index[p.root])
        files.update(got)
        partitions_out[f"{p.topic}-{p.partition}"] = part
    for root, ri in root_index.items():
        for i in list_dir(fs, root):
            name = i.base_name
            if i.type != pafs.FileType.File or name in _ROOT_SKIP or name in _ROOT_CHECKPOINTS \
                    or (name.startswith(".kafkalog.") and name.endswith(".lock")) \
                    or name.startswith((".kafkalog-staging.", ".kafkalog-aborted.")):
                continue
            files[f"#{ri}/{name}" if ri else name] = {
                "root": ri, "kind": "root", **_file_entry(fs, i.path, int(i.size or 0))}
    return {"format": MANIFEST_FORMAT, "created_ms": int(time.time() * 1000),
            "roots": list(logdirs.roots), "checksum": "sha256",
            "partitions": dict(sorted(partitions_out.items())),
            "files": dict(sorted(files.items()))}


def write_manifest(logdirs: LogDirs, out_path: str,
                   partitions: Iterable[PartitionDir] | None = None) -> dict:
    """:func:`build_manifest`, written as JSON to the local file ``out_path``
    (:func:`save_manifest`)."""
    doc = build_manifest(logdirs, partitions)
    save_manifest(doc, out_path)
    return doc


def save_manifest(doc: dict, out_path: str) -> None:
    """Write the manifest ``doc`` to the local file ``out_path`` whole (the package's one
    atomic write: an earlier manifest stays until the new one is complete)."""
    write_atomic(pafs.LocalFileSystem(), out_path,
                 (json.dumps(doc, indent=1) + "\n").encode("utf-8"))


def read_manifest(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as err:
        raise LogLayoutError(f"cannot read manifest: {err}", path=path) from err
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
        raise LogLayoutError(f"not a {MANIFEST_FORMAT} manifest", path=path)
    return doc


def _what(e: dict) -> str:
    if e.get("kind") == "segment" and e.get("first_offset") is not None:
        return (f"segment, offsets {e['first_offset']}..{e['last_offset']}, "
                f"{e['records']} records, {e['size']} bytes")
    if e.get("kind") == "segment":
        return f"segment, no batches, {e['size']} bytes"
    return f"{e.get('kind', 'file')}, {e['size']} bytes"


def tp_of(rel: str) -> tuple[str | None, int | None]:
    """``(topic, partition)`` of a manifest path inside a partition dir, else Nones."""
    if "/" not in rel or rel.startswith("#"):
        return None, None
    name = rel.split("/", 1)[0]
    topic, _, q = name.rpartition("-")
    return (topic, int(q)) if q.isdigit() else (None, None)


def check_manifest(manifest: dict, copy: dict, copy_roots: list[str],
                   topics: Iterable[str] | None = None) -> list[Finding]:
    """The differences between ``manifest`` and ``copy`` (:func:`build_manifest` of the
    copy), one finding (severity error, kind ``manifest``) each, paths in the copy.
    ``topics``: compare only these topics' partitions (and the roots' files)."""
    out: list[Finding] = []
    if topics is not None:
        keep = set(topics)

        def wanted(rel: str) -> bool:
            t = tp_of(rel)[0]
            return t is None or t in keep
        manifest = {**manifest, "files": {k: v for k, v in manifest.get("files", {}).items()
                                          if wanted(k)},
                    "partitions": {k: v for k, v in manifest.get("partitions", {}).items()
                                   if k.rpartition("-")[0] in keep}}

    def where(rel: str, e: dict) -> str:
        ri = e.get("root", 0)
        base = copy_roots[ri] if ri < len(copy_roots) else copy_roots[0]
        return join(base, rel.split("/", 1)[1] if rel.startswith("#") else rel)

    def add(rel: str, e: dict, message: str, offset=None) -> None:
        t, q = tp_of(rel)
        out.append(Finding(ERROR, "manifest", where(rel, e), None, offset, message, t, q))

    want, have = manifest.get("files", {}), copy.get("files", {})
    for rel, e in want.items():
        c = have.get(rel)
        if c is None:
            add(rel, e, f"missing: {rel} ({_what(e)}) is in the manifest, not in the copy",
                e.get("first_offset"))
            continue
        if c["size"] == e["size"] and c["sha256"] == e["sha256"]:
            continue
        if c["size"] < e["size"]:
            head = f"truncated: {rel} has {c['size']} of its {e['size']} bytes"
        elif c["size"] == e["size"]:
            head = f"altered: {rel} has its {e['size']} bytes but not the same ones"
        else:
            head = f"altered: {rel} has {c['size']} bytes, the manifest {e['size']}"
        detail = ""
        if e.get("kind") == "segment":
            detail = (f" (manifest: offsets {e.get('first_offset')}..{e.get('last_offset')}, "
                      f"{e.get('records')} records; copy: offsets {c.get('first_offset')}.."
                      f"{c.get('last_offset')}, {c.get('records')} records)")
        add(rel, e, f"{head}, SHA-256 {c['sha256'][:16]}... instead of "
                    f"{e['sha256'][:16]}...{detail}", e.get("first_offset"))
    for rel, c in have.items():
        if rel not in want:
            add(rel, c, f"extra: {rel} ({_what(c)}) is in the copy, not in the manifest",
                c.get("first_offset"))
    wparts, hparts = manifest.get("partitions", {}), copy.get("partitions", {})
    for tp, e in wparts.items():
        c = hparts.get(tp)
        if c is None:
            continue            # its files are reported missing
        for name, v in e.get("checkpoints", {}).items():
            cv = c.get("checkpoints", {}).get(name)
            if cv != v:
                root = copy_roots[c.get("root", 0)] if copy_roots else ""
                t, _, q = tp.rpartition("-")
                out.append(Finding(ERROR, "manifest", join(root, name), None, v,
                                   f"checkpoint: {name} holds {cv} for {tp}, the manifest "
                                   f"{v}", t, int(q)))
    return out

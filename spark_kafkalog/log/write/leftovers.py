"""Staging files a dead writer left at a log-dir root (``.kafkalog-staging.*``), and who
owns them.

A batch write records its owner when it is planned: ``.kafkalog-staging.<token>.owner``
(the token of the write id, as its staging files are named) holding the host, pid and
start time of the Spark driver's JVM on the driver (the process the write lives and dies
with). The write's own commit or abort deletes it with its staging files. Files of a
write whose owner is known dead (same host, process gone or its pid reused) are
leftovers no live writer can commit: :func:`remove_dead_staging` deletes them. Files
without an owner record (a streaming micro-batch's, an older version's) or of another
host's writer are only reported; the commit path's age rule
(:data:`~.config.STAGING_TTL_S`) still removes them.
"""
from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass

import pyarrow.fs as pafs

from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.files.lock import holder_alive, process_start_time
from spark_kafkalog.log.io import delete_file
from spark_kafkalog.log.write.files import listdir, make_dirs, write_new

OWNER_SUFFIX = ".owner"


def owner_path(root: str, write_id: str) -> str:
    """The owner record of ``write_id``'s staging files (deleted with them: its name has
    their prefix)."""
    return f"{root.rstrip('/')}/{jr.STAGING_PREFIX}{jr.write_token(write_id)}{OWNER_SUFFIX}"


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return int(stat[stat.rfind(b")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def driver_pid() -> int:
    """The process a write lives with: the nearest ``java`` ancestor of this process
    (Spark plans a Python data source's write in a worker its driver JVM starts), else
    this process (no /proc, or no JVM above: the library called directly)."""
    pid: int | None = os.getpid()
    for _ in range(8):
        pid = _parent(pid) if pid else None
        if not pid or pid == 1:
            break
        if _comm(pid) == "java":
            return pid
    return os.getpid()


def record_owner(fs: pafs.FileSystem, root: str, write_id: str) -> None:
    """Write the owner record of ``write_id`` into log dir ``root`` (before any task
    stages a byte)."""
    pid = driver_pid()
    record = {"host": socket.gethostname(), "pid": pid, "start": process_start_time(pid),
              "write_id": write_id, "since_ms": int(time.time() * 1000)}
    make_dirs(fs, root)        # a new log dir: the tasks' staging would create it too
    write_new(fs, owner_path(root, write_id), json.dumps(record).encode(), fsync=False)


@dataclass(frozen=True)
class Leftover:
    """The staging files of one write at a log-dir root."""
    token: str
    paths: tuple[str, ...]          # the owner record last
    size: int                       # bytes, owner record included
    owner: dict | None              # the owner record; None when there is none
    alive: bool | None              # the owner runs (True), is gone (False), unknown

    def describe(self) -> str:
        who = ("no owner record" if self.owner is None else
               f"writer pid {self.owner.get('pid')} on {self.owner.get('host')}: "
               + {True: "running", False: "no longer running",
                  None: "another host, not known"}[self.alive])
        n = len(self.paths)
        return (f"{n:,} staging file{'' if n == 1 else 's'} ({self.size:,} bytes) of write "
                f"{(self.owner or {}).get('write_id') or self.token} ({who})")


def _read_owner(fs: pafs.FileSystem, path: str) -> dict | None:
    try:
        with fs.open_input_stream(path) as f:
            record = json.loads(f.read().decode())
        return record if isinstance(record, dict) else None
    except (OSError, ValueError):
        return None


def staging_leftovers(fs: pafs.FileSystem, root: str) -> list[Leftover]:
    """Every write's staging files at ``root``, with what is known of its owner."""
    groups: dict[str, list[tuple[str, int]]] = {}
    for name, is_dir, size, _mtime in listdir(fs, root, jr.STAGING_PREFIX):
        if is_dir:
            continue
        token = name[len(jr.STAGING_PREFIX):].split(".", 1)[0]
        groups.setdefault(token, []).append((name, size))
    out = []
    base = root.rstrip("/")
    for token, files in sorted(groups.items()):
        owner_name = f"{jr.STAGING_PREFIX}{token}{OWNER_SUFFIX}"
        names = sorted(n for n, _ in files if n != owner_name)
        has_owner = any(n == owner_name for n, _ in files)
        owner = _read_owner(fs, f"{base}/{owner_name}") if has_owner else None
        paths = [f"{base}/{n}" for n in names] + ([f"{base}/{owner_name}"] if has_owner
                                                   else [])
        out.append(Leftover(token, tuple(paths), sum(s for _, s in files), owner,
                            holder_alive(owner) if owner else None))
    return out


def remove_dead_staging(fs: pafs.FileSystem, root: str) -> list[Leftover]:
    """Delete the staging files of every write whose owner is gone (the owner record
    last, so an interrupted sweep is finished by the next); those removed."""
    removed = []
    for leftover in staging_leftovers(fs, root):
        if leftover.alive is False:
            for path in leftover.paths:
                delete_file(fs, path, missing_ok=True)
            removed.append(leftover)
    return removed

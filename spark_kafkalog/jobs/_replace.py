"""A job's replaced output (``export_parquet --mode overwrite``) is written beside the old
one and swapped in only when complete: a failed or killed run leaves the old output or
the new one, and its leftovers are finished or removed by the next run.

Names, all siblings of ``OUT`` (hidden: Spark and Hive skip names starting with ``.``):
``.OUT.kafkalog-new-ID`` the new output while Spark writes it;
``.OUT.kafkalog-old-ID``  the old output moved aside (local, HDFS: one directory rename);
``.OUT.kafkalog-clear-ID`` / ``.OUT.kafkalog-move-ID`` empty marker files saying which
step of an object-store swap runs (there a directory "rename" copies object by object).

Local and HDFS (atomic directory rename): new complete -> ``OUT`` renamed to ``-old-ID``
-> ``-new-ID`` renamed to ``OUT`` -> ``-old-ID`` deleted. On local Linux disks the two
renames are one exchange (``renameat2``), so ``OUT`` never goes missing; ``-new-ID`` then
holds the old output until deleted. :func:`recover`: an ``-old-ID``
means the new output was complete when the swap began, so it is finished; a ``-new-ID``
alone is an unfinished write and is deleted.

Object stores: new complete -> ``-clear-ID`` marker -> ``OUT`` deleted -> ``-move-ID``
marker, ``-clear-ID`` removed -> each object of ``-new-ID`` moved under ``OUT`` -> marker
removed. :func:`recover` resumes the step its marker names.
"""
from __future__ import annotations

import os
import shutil
import uuid

from spark_kafkalog.log.io import sysio

NEW, OLD, CLEAR, MOVE = "new", "old", "clear", "move"
#: URI schemes whose directory rename is one atomic metadata operation
ATOMIC_RENAME_SCHEMES = ("", "file", "hdfs", "viewfs")


def sibling(output: str, kind: str, run_id: str) -> str:
    parent, name = _split(output)
    return f"{parent}/.{name}.kafkalog-{kind}-{run_id}"


def _split(output: str) -> tuple[str, str]:
    output = output.rstrip("/")
    parent, _, name = output.rpartition("/")
    return parent or ("/" if output.startswith("/") else "."), name


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


class LocalFiles:
    """The operations a swap needs, on the local filesystem (tests, pre-Spark checks)."""
    atomic_rename = True

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def rename(self, src: str, dst: str) -> None:
        sysio.replace(src, dst)         # POSIX rename; a failure names the file and errno

    def exchange(self, a: str, b: str) -> bool:
        return sysio.exchange(a, b)

    def delete(self, path: str) -> None:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)

    def touch(self, path: str) -> None:
        open(path, "wb").close()

    def list_names(self, parent: str) -> list[str]:
        try:
            return os.listdir(parent)
        except FileNotFoundError:
            return []

    def files_under(self, root: str) -> list[str]:
        return sorted(os.path.relpath(os.path.join(d, f), root)
                      for d, _sub, files in os.walk(root) for f in files)

    def move_file(self, src: str, dst: str) -> None:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        os.replace(src, dst)


class HadoopFiles:
    """The same operations through the Hadoop FileSystem Spark writes with (py4j), so
    every scheme Spark can write (file, hdfs, s3a, abfs, gs ...) is covered."""

    def __init__(self, spark, output: str):
        jvm = spark._jvm
        self._Path = jvm.org.apache.hadoop.fs.Path
        self.fs = self._Path(output).getFileSystem(spark._jsc.hadoopConfiguration())
        scheme = self.fs.getUri().getScheme() or ""
        self.atomic_rename = scheme.lower() in ATOMIC_RENAME_SCHEMES

    def _p(self, path: str):
        return self._Path(path)

    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(self._p(path)))

    def rename(self, src: str, dst: str) -> None:
        if not self.fs.rename(self._p(src), self._p(dst)):
            raise OSError(f"could not rename {src} to {dst}")

    def delete(self, path: str) -> None:
        self.fs.delete(self._p(path), True)

    def touch(self, path: str) -> None:
        self.fs.create(self._p(path), True).close()

    def list_names(self, parent: str) -> list[str]:
        p = self._p(parent)
        if not self.fs.exists(p):
            return []
        return [st.getPath().getName() for st in self.fs.listStatus(p)]

    def files_under(self, root: str) -> list[str]:
        base = self.fs.makeQualified(self._p(root)).toUri().getPath().rstrip("/")
        it = self.fs.listFiles(self._p(root), True)
        out = []
        while it.hasNext():
            path = it.next().getPath().toUri().getPath()
            out.append(path[len(base) + 1:])
        return sorted(out)

    def exchange(self, a: str, b: str) -> bool:
        return False                    # Hadoop's FileSystem has no atomic exchange

    def move_file(self, src: str, dst: str) -> None:
        self.fs.mkdirs(self._p(dst).getParent())
        self.rename(src, dst)


def leftovers(files, output: str) -> dict[str, dict[str, str]]:
    """run id -> kind -> path of the swap files a run left beside ``output``."""
    parent, name = _split(output)
    prefix = f".{name}.kafkalog-"
    found: dict[str, dict[str, str]] = {}
    for entry in files.list_names(parent):
        if not entry.startswith(prefix):
            continue
        kind, _, run_id = entry[len(prefix):].partition("-")
        if kind in (NEW, OLD, CLEAR, MOVE) and run_id:
            found.setdefault(run_id, {})[kind] = f"{parent}/{entry}"
    return found


def _move_all(files, src: str, dst: str) -> None:
    for rel in files.files_under(src):
        files.move_file(f"{src}/{rel}", f"{dst}/{rel}")
    files.delete(src)


def recover(files, output: str) -> list[str]:
    """Finish or undo what killed runs left beside ``output``; returns one line per run
    acted on (for the job's progress output)."""
    done = []
    for run_id, kinds in sorted(leftovers(files, output).items()):
        new = kinds.get(NEW)
        if OLD in kinds:                               # rename swap began: new is complete
            if new is not None and not files.exists(output):
                files.rename(new, output)
            elif new is not None:                      # OUT re-created since: keep it
                files.delete(new)
            files.delete(kinds[OLD])
            done.append(f"finished the replacement of {output} by run {run_id}")
        elif CLEAR in kinds or MOVE in kinds:          # object-store swap began
            if CLEAR in kinds and files.exists(output):
                files.delete(output)
            if new is not None:
                _move_all(files, new, output)
            for kind in (CLEAR, MOVE):
                if kind in kinds:
                    files.delete(kinds[kind])
            done.append(f"finished the replacement of {output} by run {run_id}")
        elif new is not None:                          # an unfinished write
            files.delete(new)
            done.append(f"removed the unfinished output of run {run_id}")
    return done


def swap_in(files, output: str, new: str, run_id: str) -> None:
    """Make the complete output ``new`` the one at ``output`` (see the module doc)."""
    if files.atomic_rename:
        if files.exists(output) and files.exchange(new, output):
            files.delete(new)           # the old output now; recover() drops it if killed
            return
        if files.exists(output):
            old = sibling(output, OLD, run_id)
            files.rename(output, old)
            files.rename(new, output)
            files.delete(old)
        else:
            files.rename(new, output)
        return
    clear, move = sibling(output, CLEAR, run_id), sibling(output, MOVE, run_id)
    files.touch(clear)
    if files.exists(output):
        files.delete(output)
    files.touch(move)
    files.delete(clear)
    _move_all(files, new, output)
    files.delete(move)


def write_replacing(spark, output: str, write) -> list[str]:
    """Replace the Spark output ``output`` by what ``write(path)`` writes at ``path``:
    leftovers of killed runs recovered first, the new output written beside the old one,
    swapped in when ``write`` returns, removed when it raises. Returns recovery's lines."""
    files = HadoopFiles(spark, output)
    lines = recover(files, output)
    run_id = new_run_id()
    target = sibling(output, NEW, run_id)
    try:
        write(target)
    except BaseException:
        files.delete(target)
        raise
    swap_in(files, output, target, run_id)
    return lines

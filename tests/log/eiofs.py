"""Real I/O errors from the kernel: a FUSE passthrough filesystem (fusepy over libfuse2)
over a backing directory that fails chosen operations with a chosen errno.

The test's process sees the errno from the system call itself (``read``, ``write``,
``fsync``, ``rename``...), below every layer of ours and of pyarrow: nothing in the
process under test is patched. The server runs in a process of its own
(``python -m tests.log.eiofs BACKING MOUNT RULES``); :func:`eio_fs` mounts it and
unmounts it. Rules are a JSON list in the file ``RULES`` (outside the mount), read again
whenever it changes: ``{"op": "write", "path": "summary.json.tmp", "errno": 5}`` fails
every ``write`` of a path containing that text; ``"after": N`` lets the first N such
calls through. Files are opened ``direct_io``, so every read reaches the server (no page
cache answers in its place) and every write is sent as it is made; the kernel caches no
attributes or names.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

__all__ = ["eio_fs", "fuse_unavailable", "set_rules"]


def fuse_unavailable() -> str | None:
    """Why no FUSE filesystem can be mounted here (None: it can)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "mounting FUSE filesystems needs root here (CI runs as root)"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    try:
        import fuse  # noqa: F401  (fusepy: also loads libfuse2)
    except (ImportError, OSError, EnvironmentError) as err:
        return f"fusepy or libfuse2 is missing ({err}): `make fuse` installs them"
    return None


def set_rules(rules_file: str, rules: list[dict]) -> None:
    """Replace the server's rules (whole: it never reads a half-written file)."""
    tmp = rules_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump(rules, f)
    os.replace(tmp, rules_file)


@contextlib.contextmanager
def eio_fs(backing: str | None = None):
    """``(mount, backing, rules_file)``: a FUSE passthrough of ``backing`` (default: a
    fresh temporary directory) mounted at a temporary directory, no rule set yet."""
    own = backing is None
    backing = backing or tempfile.mkdtemp(prefix="kafkalog-eio-backing-")
    mnt = tempfile.mkdtemp(prefix="kafkalog-eio-")
    rules_file = mnt + ".rules.json"
    set_rules(rules_file, [])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-m", "tests.log.eiofs", backing, mnt,
                             rules_file], env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + 20
        while not os.path.ismount(mnt):
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise RuntimeError("the FUSE filesystem did not mount: "
                                   + log.read().decode(errors="replace")[-2000:])
            time.sleep(0.02)
        yield mnt, backing, rules_file
    finally:
        subprocess.run(["fusermount", "-u", "-z", mnt], capture_output=True)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        with contextlib.suppress(OSError):
            os.rmdir(mnt)
        with contextlib.suppress(OSError):
            os.unlink(rules_file)
        log.close()
        if own:
            shutil.rmtree(backing, ignore_errors=True)


# ---- the server (its own process) ------------------------------------------------------------
def _serve(backing: str, mnt: str, rules_file: str) -> None:
    from fuse import FUSE, FuseOSError, Operations

    class Failing(Operations):
        """Passthrough of ``backing``; an operation a rule names fails with its errno."""

        def __init__(self):
            self.rules: list[dict] = []
            self.mtime = None
            self.counts: dict[int, int] = {}

        def _check(self, op: str, path: str) -> None:
            try:
                mtime = os.stat(rules_file).st_mtime_ns
            except OSError:
                mtime = None
            if mtime != self.mtime:
                self.mtime = mtime
                with contextlib.suppress(OSError, ValueError):
                    with open(rules_file) as f:
                        self.rules = json.load(f)
                self.counts = {}
            for i, rule in enumerate(self.rules):
                if rule["op"] == op and rule.get("path", "") in path:
                    n = self.counts.get(i, 0)
                    self.counts[i] = n + 1
                    if n >= rule.get("after", 0):
                        raise FuseOSError(rule.get("errno", errno.EIO))

        def _real(self, path: str) -> str:
            return os.path.join(backing, path.lstrip("/"))

        def _os(self, fn, *args):
            try:
                return fn(*args)
            except OSError as err:
                raise FuseOSError(err.errno) from None

        def access(self, path, mode):
            if not os.access(self._real(path), mode):
                raise FuseOSError(errno.EACCES)

        def getattr(self, path, fh=None):
            st = self._os(os.lstat, self._real(path))
            return {k: getattr(st, k) for k in (
                "st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink",
                "st_size", "st_uid", "st_ino")}

        def readdir(self, path, fh):
            self._check("readdir", path)
            return [".", ".."] + self._os(os.listdir, self._real(path))

        def statfs(self, path):
            st = self._os(os.statvfs, self._real(path))
            return {k: getattr(st, k) for k in (
                "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                "f_files", "f_flag", "f_frsize", "f_namemax")}

        def chmod(self, path, mode):
            return self._os(os.chmod, self._real(path), mode)

        def chown(self, path, uid, gid):
            return self._os(os.chown, self._real(path), uid, gid)

        def utimens(self, path, times=None):
            return self._os(os.utime, self._real(path), times)

        def mkdir(self, path, mode):
            self._check("mkdir", path)
            return self._os(os.mkdir, self._real(path), mode)

        def rmdir(self, path):
            return self._os(os.rmdir, self._real(path))

        def unlink(self, path):
            self._check("unlink", path)
            return self._os(os.unlink, self._real(path))

        def rename(self, old, new):
            self._check("rename", old)
            return self._os(os.rename, self._real(old), self._real(new))

        def link(self, target, source):
            self._check("link", target)
            return self._os(os.link, self._real(source), self._real(target))

        def symlink(self, target, source):
            return self._os(os.symlink, source, self._real(target))

        def readlink(self, path):
            return self._os(os.readlink, self._real(path))

        def open(self, path, flags):
            self._check("open", path)
            return self._os(os.open, self._real(path), flags)

        def create(self, path, mode, fi=None):
            self._check("create", path)
            return self._os(os.open, self._real(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                            mode)

        def read(self, path, size, offset, fh):
            self._check("read", path)
            return self._os(os.pread, fh, size, offset)

        def write(self, path, data, offset, fh):
            self._check("write", path)
            return self._os(os.pwrite, fh, data, offset)

        def truncate(self, path, length, fh=None):
            self._check("truncate", path)
            return self._os(os.truncate, self._real(path), length)

        def flush(self, path, fh):
            return 0

        def fsync(self, path, datasync, fh):
            self._check("fsync", path)
            return self._os(os.fsync, fh)

        def fsyncdir(self, path, datasync, fh):
            self._check("fsyncdir", path)
            return 0

        def release(self, path, fh):
            return self._os(os.close, fh)

    # no attribute or name caching in the kernel: what the backing directory holds (a
    # test may change it behind the mount) is what every call sees
    FUSE(Failing(), mnt, foreground=True, nothreads=True, direct_io=True,
         allow_other=True, attr_timeout=0, entry_timeout=0, negative_timeout=0)


if __name__ == "__main__":
    _serve(*sys.argv[1:4])

"""Locks a writer takes before it changes a log dir, all files at the log-dir root (a broker
ignores root *files*):

- ``.lock``, the broker's own (Kafka's ``FileChannel.tryLock``: an exclusive POSIX record
  lock): :class:`BrokerDirGuard` holds a *shared* record lock on it during a commit, so a
  commit fails while a broker runs and a broker cannot start mid-commit;
- ``.kafkalog.<topic>.lock``: :class:`TopicLock`, an exclusive ``flock`` the kernel
  releases when its holder dies, recording the holder for error messages; on object
  stores a best-effort lease object (expiry + same-host liveness; no compare-and-swap);
- ``.kafkalog.lock``: :class:`CheckpointLock`, around a read-modify-write of the root
  checkpoint files every topic shares.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import threading
import time
import uuid
import warnings
from dataclasses import dataclass

import pyarrow.fs as pafs

from spark_kafkalog.errors import LockError
from spark_kafkalog.log.io import is_local, sysio

BROKER_LOCK_FILE = ".lock"
CHECKPOINT_LOCK_FILE = ".kafkalog.lock"
DEFAULT_LOCK_TIMEOUT_S = 600.0
DEFAULT_LEASE_S = 300.0


def topic_lock_path(root: str, topic: str) -> str:
    return f"{root.rstrip('/')}/.kafkalog.{topic}.lock"


def process_start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (Linux ``/proc``), or None when the
    process does not exist or /proc is unavailable. Identifies a process across pid
    reuse."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # comm (field 2) may hold spaces and parentheses: split after the last ')'.
    rest = stat[stat.rfind(b")") + 2:].split()
    try:
        return int(rest[19])          # field 22 overall: starttime
    except (IndexError, ValueError):
        return None


def _owner_record(write_id: str | None) -> dict:
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "start": process_start_time(pid),
            "write_id": write_id, "since_ms": int(time.time() * 1000)}


#: tokens of the object-store leases TopicLocks of this process hold now
_LIVE_LEASES: set[str] = set()


def _own_stale_lease(owner: dict) -> bool:
    """A lease this very process wrote and no longer holds (its release could not
    delete it: the store failed): free, not a live holder to wait for."""
    return (owner.get("host") == socket.gethostname() and owner.get("pid") == os.getpid()
            and owner.get("token") not in _LIVE_LEASES)


def holder_alive(owner: dict) -> bool | None:
    """Whether the process an owner record names is still running: True/False on this
    host, None (unknown) for another host."""
    if owner.get("host") != socket.gethostname():
        return None
    pid = owner.get("pid")
    if not isinstance(pid, int):
        return False
    start = process_start_time(pid)
    if start is None:
        return False
    return owner.get("start") in (None, start)


# ---- the broker's .lock ------------------------------------------------------------------
# POSIX record locks belong to the process, and closing *any* descriptor of the file drops
# them all: every guard of one root in this process shares one descriptor, refcounted.
_posix_guards: dict[str, list] = {}
_posix_guards_mutex = threading.Lock()


class BrokerDirGuard:
    """Context manager: fail with :class:`LockError` when a running broker holds
    ``<root>/.lock``; otherwise hold a shared lock on it until exit (local filesystems
    only; a no-op elsewhere — no broker runs on an object store)."""

    def __init__(self, fs: pafs.FileSystem, root: str):
        self.fs = fs
        self.root = root.rstrip("/") or "/"
        self._key: str | None = None

    def __enter__(self) -> "BrokerDirGuard":
        if not is_local(self.fs):
            return self
        path = os.path.join(self.root, BROKER_LOCK_FILE)
        key = os.path.realpath(path)
        with _posix_guards_mutex:
            entry = _posix_guards.get(key)
            if entry is None:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except OSError as err:
                    os.close(fd)
                    if err.errno in (errno.EACCES, errno.EAGAIN):
                        raise LockError(
                            "a running Kafka broker holds this log dir (its .lock is locked); "
                            "stop the broker or write to a copy of the log dir",
                            path=path) from err
                    raise
                entry = [fd, 0]
                _posix_guards[key] = entry
            entry[1] += 1
            self._key = key
        return self

    def __exit__(self, *exc) -> None:
        if self._key is None:
            return
        with _posix_guards_mutex:
            entry = _posix_guards[self._key]
            entry[1] -= 1
            if entry[1] == 0:
                del _posix_guards[self._key]
                os.close(entry[0])        # releases the record lock
        self._key = None


def check_broker_lock(fs: pafs.FileSystem, root: str) -> None:
    """Raise :class:`LockError` when a running broker holds ``<root>/.lock`` (local
    filesystems; elsewhere nothing is checked). A probe only: it opens the file read-only
    (creating nothing, so it may run on a destination that must stay byte-identical) and
    takes a shared record lock for an instant. A guard of this process already on the
    file means no broker holds it (and closing another descriptor would drop the
    guard's lock: POSIX record locks belong to the process)."""
    if not is_local(fs):
        return
    path = os.path.join(root.rstrip("/") or "/", BROKER_LOCK_FILE)
    with _posix_guards_mutex:
        if os.path.realpath(path) in _posix_guards:
            return
        try:
            fd = os.open(path, os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError):
            return
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno in (errno.EACCES, errno.EAGAIN):
                raise LockError("a running Kafka broker holds this log dir (its .lock is "
                                "locked); stop the broker or use a copy of the log dir",
                                path=path) from None
            raise
        finally:
            os.close(fd)          # drops the probe's shared lock (we held no other)


# ---- our per-topic writer lock ----------------------------------------------------------
def topic_lock_free(root: str, topic: str) -> bool:
    """Whether no process holds ``topic``'s writer lock in local log dir ``root`` right
    now (a dead holder's flock is gone). A reader's probe: it takes a shared flock for
    an instant without creating or writing the file (a writer trying the lock then
    retries), and needs no write permission."""
    try:
        fd = os.open(topic_lock_path(root, topic), os.O_RDONLY)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return True
    except OSError:
        return False            # held (EWOULDBLOCK), or flock unsupported: not known free
    finally:
        os.close(fd)            # drops the shared lock


@dataclass
class _Held:
    fd: int | None
    token: str


class TopicLock:
    """Exclusive per-topic writer lock. ``acquire`` waits up to ``timeout`` seconds for a
    live holder and raises :class:`LockError` naming the holder after that; a
    holder that died (SIGKILL, crash) never blocks: its flock died with it (local), or
    its lease is taken over once the holder is known dead or the lease expired (object
    stores)."""

    def __init__(self, fs: pafs.FileSystem, root: str, topic: str, *,
                 write_id: str | None = None, timeout: float = DEFAULT_LOCK_TIMEOUT_S,
                 lease_s: float = DEFAULT_LEASE_S):
        self.fs = fs
        self.path = topic_lock_path(root, topic)
        self.topic = topic
        self.write_id = write_id
        self.timeout = timeout
        self.lease_s = lease_s
        self._held: _Held | None = None

    # ---- local: flock --------------------------------------------------------------
    def _acquire_local(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.timeout
        delay = 0.005
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as err:
                    if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                        raise
                if time.monotonic() >= deadline:
                    raise LockError(
                        f"topic {self.topic!r} is being written by another writer "
                        f"({self._describe_holder(fd)}); gave up after {self.timeout:g}s",
                        path=self.path)
                time.sleep(delay)
                delay = min(delay * 2, 0.25)
            record = json.dumps(_owner_record(self.write_id)).encode()
            sysio.ftruncate(fd, 0, self.path)
            sysio.write_fully(fd, record, 0, self.path)
        except BaseException:
            os.close(fd)
            raise
        self._held = _Held(fd=fd, token="")

    @staticmethod
    def _describe_holder(fd: int) -> str:
        try:
            raw = os.pread(fd, 4096, 0)
            owner = json.loads(raw.decode()) if raw else {}
        except (OSError, ValueError):
            owner = {}
        if not owner:
            return "holder unknown"
        return (f"host {owner.get('host')}, pid {owner.get('pid')}, "
                f"write {owner.get('write_id')}")

    # ---- object stores: lease object -----------------------------------------------------
    def _read_lease(self) -> dict | None:
        try:
            with self.fs.open_input_stream(self.path) as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        except OSError as err:
            if "not found" in str(err).lower() or "does not exist" in str(err).lower():
                return None
            raise sysio.storage_error("open", self.path, err) from err
        try:
            return json.loads(raw.decode())
        except ValueError:
            return {}          # unreadable lease: treat as expired (written by a crash)

    def _write_lease(self, token: str) -> None:
        rec = _owner_record(self.write_id)
        rec["token"] = token
        rec["expires_ms"] = int((time.time() + self.lease_s) * 1000)
        with sysio.remote("write", self.path), self.fs.open_output_stream(self.path) as f:
            f.write(json.dumps(rec).encode())

    def _acquire_lease(self) -> None:
        token = uuid.uuid4().hex
        deadline = time.monotonic() + self.timeout
        delay = 0.05
        while True:
            cur = self._read_lease()
            free = (cur is None or not cur
                    or cur.get("expires_ms", 0) < time.time() * 1000
                    or holder_alive(cur) is False or _own_stale_lease(cur))
            if free:
                _LIVE_LEASES.add(token)     # before it is visible: never taken for stale
                try:
                    self._write_lease(token)
                    # Last writer wins on an object store: read back to see who did.
                    time.sleep(0.05)
                    cur = self._read_lease()
                except BaseException:
                    _LIVE_LEASES.discard(token)
                    raise
                if cur and cur.get("token") == token:
                    self._held = _Held(fd=None, token=token)
                    return
                _LIVE_LEASES.discard(token)
            if time.monotonic() >= deadline:
                who = (f"host {cur.get('host')}, pid {cur.get('pid')}, write "
                       f"{cur.get('write_id')}") if cur else "holder unknown"
                raise LockError(
                    f"topic {self.topic!r} is being written by another writer ({who}); "
                    f"gave up after {self.timeout:g}s", path=self.path)
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def refresh(self) -> None:
        """Extend an object-store lease (no-op for flock)."""
        if self._held is not None and self._held.fd is None:
            self._write_lease(self._held.token)

    # ---- common ---------------------------------------------------------------------------
    def acquire(self) -> "TopicLock":
        if self._held is not None:
            raise LockError("TopicLock is not reentrant: this holder has it already",
                            path=self.path)
        if is_local(self.fs):
            self._acquire_local()
        else:
            self._acquire_lease()
        return self

    def release(self) -> None:
        held, self._held = self._held, None
        if held is None:
            return
        if held.fd is not None:
            # Leave the file (unlinking would race a waiter that opened it already).
            os.close(held.fd)
        else:
            try:
                cur = self._read_lease()
                if cur and cur.get("token") == held.token:
                    with sysio.remote("unlink", self.path):
                        self.fs.delete_file(self.path)
            except OSError as err:
                # what the lease guarded is done (or undone); a lease left behind
                # expires, and this process knows it for its own
                warnings.warn(f"could not remove the writer lease ({err}); it expires "
                              f"{self.lease_s:g}s after it was written", RuntimeWarning,
                              stacklevel=2)
            finally:
                _LIVE_LEASES.discard(held.token)

    def __enter__(self) -> "TopicLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


class CheckpointLock:
    """Short exclusive lock around a read-modify-write of the root checkpoint files
    (local: flock on ``<root>/.kafkalog.lock``; elsewhere a no-op: object-store writes of
    different topics to one root are not serialized)."""

    def __init__(self, fs: pafs.FileSystem, root: str):
        self.fs = fs
        self.path = os.path.join(root, CHECKPOINT_LOCK_FILE)
        self._fd: int | None = None

    def __enter__(self) -> "CheckpointLock":
        if is_local(self.fs):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)     # held for milliseconds by live processes only
            self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

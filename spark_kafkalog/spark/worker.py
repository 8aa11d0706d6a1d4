"""Process-wide tuning of the Python worker processes Spark runs our code in, in one place.

- :func:`freeze_heap` (on by default; ``SPARK_KAFKALOG_GC_FREEZE=0`` turns it off):
  ``gc.freeze()`` at a task's start, so the full ``gc.collect()`` Spark's worker daemon
  runs after every task walks only what the task made, not every module-level object of
  pyarrow/numpy/pandas. Not reclaimed: reference cycles among objects alive at a task's
  start that die later (module state and caches).
- :func:`keep_freed_heap` (opt-in: ``SPARK_KAFKALOG_MALLOC_TUNE=1`` in the executors'
  environment, e.g. ``spark.executorEnv.SPARK_KAFKALOG_MALLOC_TUNE=1``): sets glibc's
  ``mallopt`` thresholds so the ~32 MiB a write task frees after each flush is kept for
  the next one instead of being handed back to the kernel and faulted in again. It
  changes the whole worker process's allocator for its lifetime, so it is never on
  unless asked for; other C libraries are left alone.

Why, with measurements: ``docs/PERFORMANCE.md`` (section ``spark/worker.py``).
"""
from __future__ import annotations

import ctypes
import gc
import os

__all__ = ["freeze_heap", "keep_freed_heap"]

ENV = "SPARK_KAFKALOG_GC_FREEZE"
MALLOC_ENV = "SPARK_KAFKALOG_MALLOC_TUNE"

#: glibc ``mallopt`` parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: glibc's largest dynamic mmap threshold (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit), and the
#: trim threshold its dynamic adjustment pairs with it
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD

_tuned_pid: int | None = None


def _off(name: str) -> bool:
    return os.environ.get(name, "1").strip().lower() in ("0", "false", "no", "off")


def _on(name: str) -> bool:
    return os.environ.get(name, "0").strip().lower() in ("1", "true", "yes", "on")


def freeze_heap() -> bool:
    """``gc.freeze()`` unless ``SPARK_KAFKALOG_GC_FREEZE=0``; returns whether it froze.
    Cheap (the collector's lists are spliced, no object is visited)."""
    if _off(ENV):
        return False
    gc.freeze()
    return True


def keep_freed_heap() -> bool:
    """With ``SPARK_KAFKALOG_MALLOC_TUNE=1``, have glibc keep up to :data:`TRIM_THRESHOLD`
    of freed heap for reuse (see the module doc), once per process; returns whether this
    process's malloc is so tuned. False off glibc, or without the opt-in."""
    global _tuned_pid
    if _tuned_pid == os.getpid():
        return True
    if not _on(MALLOC_ENV):
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version      # glibc's: musl has a mallopt that does nothing
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    if not (mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
            and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)):
        return False
    _tuned_pid = os.getpid()
    return True

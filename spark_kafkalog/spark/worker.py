"""Hygiene for the Python worker processes Spark runs our code in.

Spark's worker daemon runs a full ``gc.collect()`` after every task a reused worker
finishes (``pyspark/daemon.py``), and every planning, commit and abort call runs in such
a worker too. A full collection walks every object the collector tracks: with pyarrow
and numpy loaded (and pandas, which Spark's own write path imports) that is 50,000 to
90,000 module-level objects, 20 to 35 ms per collection, several times per query. None
of them ever becomes garbage. :func:`freeze_heap` moves whatever is alive when a task
starts into the collector's permanent generation (``gc.freeze()``), so the collection
after the task only walks what the task itself created. Measured on the 2,000,000-row
write benchmark: Python worker CPU 1.00 -> 0.86 core-seconds.

Objects still reclaimed as before: anything the task creates (collected after the
task, as now), and every frozen object whose reference count drops to zero. Not
reclaimed: a reference cycle among objects that were alive at a task start and die
later — in a Spark worker, module state and caches. Set ``SPARK_KAFKALOG_GC_FREEZE=0``
in the executors' environment to turn it off.

A write task also holds about ``FLUSH_BYTES`` (32 MiB) of Arrow batches at a time, in
the Python ``bytes`` objects Spark's Arrow stream reader made of them: glibc takes them
from the heap, and when a flush releases them, the free top of the heap is larger than
glibc's trim threshold (twice the largest buffer it has ``mmap``-ed and freed, a few MiB),
so ``free()`` hands it back to the kernel, and the next flush faults it in again, page by
page: every byte of the task's input, once more. On a virtual machine whose free memory goes
back to the host, each of those pages is a host fault. On the 2,000,000-row write
benchmark, keeping them took the Python workers from 0.94-1.15 to 0.79-0.91
core-seconds per write (strace: 274 ``brk`` calls per worker over two writes, then none).
:func:`keep_freed_heap` sets the thresholds glibc's own adjustment would reach after one
32 MiB buffer (``mmap`` above 32 MiB, trim above 64 MiB free), so the heap a flush frees
is what the next one reuses. glibc fixes a threshold once it is set, so this lasts as long
as the worker; it keeps at most 64 MiB of free heap in it. Set
``SPARK_KAFKALOG_MALLOC_TUNE=0`` to turn it off (other C libraries are left alone).
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


def freeze_heap() -> bool:
    """``gc.freeze()`` unless ``SPARK_KAFKALOG_GC_FREEZE=0``; returns whether it froze.
    Cheap (the collector's lists are spliced, no object is visited)."""
    if _off(ENV):
        return False
    gc.freeze()
    return True


def keep_freed_heap() -> bool:
    """Have glibc keep up to :data:`TRIM_THRESHOLD` of freed heap for reuse (see the
    module doc), once per process; returns whether this process's malloc is so tuned.
    False off glibc, or with ``SPARK_KAFKALOG_MALLOC_TUNE=0``."""
    global _tuned_pid
    if _tuned_pid == os.getpid():
        return True
    if _off(MALLOC_ENV):
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

"""Independent per-partition work done concurrently where the filesystem is remote.

On an object store or HDFS each metadata read is a round trip; planning thousands of
partitions one after the other waits for each in turn. :func:`map_io` runs such work on
a bounded thread pool there, and in the caller's thread on local disk (where the work
is CPU-bound Python, which threads would only slow down). Results come back in input
order, and an error is the one the sequential loop would raise: that of the first item,
in input order, that failed, unchanged.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, TypeVar

import pyarrow.fs as pafs

from spark_kafkalog.log.io.fs import is_local

__all__ = ["map_io", "REMOTE_THREADS"]

T = TypeVar("T")
R = TypeVar("R")

#: the most requests one planning step keeps in flight on a remote filesystem
REMOTE_THREADS = 16


def map_io(fs: pafs.FileSystem, fn: Callable[[T], R], items: Iterable[T], *,
           threads: int = REMOTE_THREADS) -> list[R]:
    """``[fn(x) for x in items]``, concurrently on ``threads`` threads when ``fs`` is
    not local and there are several items. ``fn`` must be safe to run in parallel on
    distinct items. Raises the exception of the first failing item in ``items`` order
    (items after it may or may not have run; none are started once it is known)."""
    items = list(items)
    if is_local(fs) or len(items) < 2 or threads < 2:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(threads, len(items)),
                            thread_name_prefix="kafkalog-io") as pool:
        futures = [pool.submit(fn, x) for x in items]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            raise

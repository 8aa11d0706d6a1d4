"""spark/worker: freeze_heap (the permanent generation) and keep_freed_heap (glibc's
trim threshold), the off switch of the one and the opt-in of the other."""
import gc

import pytest

from spark_kafkalog.spark.worker import ENV, MALLOC_ENV, freeze_heap


def test_freezes_what_is_alive(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    keep = [[i] for i in range(1000)]            # tracked containers, alive now
    try:
        assert freeze_heap()
        assert gc.get_freeze_count() >= len(keep)
        # a cycle made after the freeze is still collected
        a = []
        a.append(a)
        del a
        assert gc.collect() >= 1
    finally:
        gc.unfreeze()


def test_off_switch(monkeypatch):
    gc.unfreeze()
    for off in ("0", "false", "OFF"):
        monkeypatch.setenv(ENV, off)
        assert not freeze_heap()
        assert gc.get_freeze_count() == 0


# A flush's worth of buffers, freed: does the worker's heap keep them (RSS stays) or hand
# them back to the kernel, to be faulted in again by the next flush?
_HEAP_PROBE = r"""
import json, os, sys
from spark_kafkalog.spark.worker import keep_freed_heap
tuned = keep_freed_heap()
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
rounds = []
for _ in range(3):
    before = rss()
    bufs = [b"x" * 1400000 for _ in range(30)]   # ~42 MB of Spark-sized Arrow messages
    held = rss()
    del bufs
    rounds.append((held - before, held - rss()))
print(json.dumps({"tuned": tuned, "again": keep_freed_heap(), "rounds": rounds}))
"""


def _heap_probe(env_value):
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    if env_value is None:
        env.pop(MALLOC_ENV, None)
    else:
        env[MALLOC_ENV] = env_value
    out = subprocess.run([sys.executable, "-c", _HEAP_PROBE], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def _glibc() -> bool:
    import platform
    return platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not _glibc(), reason="tunes glibc's malloc only")
def test_keep_freed_heap_keeps_a_flush_worth_of_freed_buffers():
    res = _heap_probe("1")                  # opt-in
    assert res["tuned"] and res["again"]
    grown, returned = res["rounds"][0]
    assert grown > 35e6                     # the first round faults its pages in
    for grown, returned in res["rounds"]:
        assert returned < 5e6               # freeing them keeps them
    for grown, _ in res["rounds"][1:]:
        assert grown < 5e6                  # and the next round reuses them


@pytest.mark.skipif(not _glibc(), reason="tunes glibc's malloc only")
@pytest.mark.parametrize("env_value", [None, "0"])
def test_keep_freed_heap_is_off_unless_asked_for(env_value):
    res = _heap_probe(env_value)
    assert not res["tuned"]
    for grown, returned in res["rounds"]:   # glibc's defaults: freed, faulted in again
        assert grown > 35e6 and returned > 35e6

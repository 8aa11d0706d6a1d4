"""spark/worker.freeze_heap: the permanent generation, and its off switch."""
import gc

from spark_kafkalog.spark.worker import ENV, freeze_heap


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

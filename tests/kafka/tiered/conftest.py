"""The tiered-storage broker of the `kafka` tier (one per session, see
``tiered_broker.py``): its topics produced and tiered (all but each partition's active
segment remote-only), then, local retention made long, a last round that stays local;
read back by Kafka's Java consumer under both isolation levels, and the broker stopped
cleanly so the tests read its files at rest."""
from __future__ import annotations

import pytest

from tests.kafka.broker import KafkaTierError, KafkaTool
from tests.kafka.tiered.tiered_broker import (keep_local, remote_root, specs, tail_specs,
                                              tiered_broker, wait_overlap, wait_tiered)


class Tiered:
    def __init__(self, broker, topics, consumed):
        self.broker = broker
        self.topics = topics
        self.consumed = consumed            # isolation -> (records, ends)
        self.logdir = str(broker.logdir)
        self.remote = str(remote_root(broker))

    def expected(self, topic: str, isolation: str) -> list[dict]:
        return sorted((r for r in self.consumed[isolation][0] if r["topic"] == topic),
                      key=lambda r: (r["partition"], r["offset"]))


@pytest.fixture(scope="session")
def tiered(tmp_path_factory):
    home = tmp_path_factory.mktemp("tiered-broker")
    try:
        broker = tiered_broker(home)
        broker.start()
    except KafkaTierError as err:
        pytest.fail(f"kafka tier: {err}", pytrace=False)
    try:
        tool = KafkaTool(broker, home / "tool")
        create, produce = specs()
        tool.create_topics(create)
        tool.produce(produce)
        names = [c["topic"] for c in create]
        wait_tiered(broker, names)
        keep_local(broker, names)
        tool.produce(tail_specs())
        wait_overlap(broker, names)
        consumed = {iso: tool.consume(names, iso)
                    for iso in ("read_uncommitted", "read_committed")}
        side = side_by_side(broker, names, home / "side.json")
    finally:
        broker.stop()
    tiered = Tiered(broker, names, consumed)
    tiered.side_by_side = side
    return tiered


def side_by_side(broker, names, out):
    """Spark's ``format("kafka")`` through the running broker and ``format("kafkalog")``
    over both tiers, in one subprocess session with the connector's jars
    (tests/kafka/spark_side_by_side.py): ``(returncode, stderr tail, out path)``."""
    import json
    import os
    import subprocess
    import sys

    from tests.kafka.broker import REPO

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    run = subprocess.run(
        [sys.executable, "-m", "tests.kafka.spark_side_by_side", broker.bootstrap,
         str(broker.logdir), ",".join(names), str(out),
         json.dumps({"remoteStorage": str(remote_root(broker))})],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    return run.returncode, run.stderr[-4000:], out

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
    finally:
        broker.stop()
    return Tiered(broker, names, consumed)

"""model/swap.py against the states a real compaction's swap passes through.

A compaction runs in this process with a fault hook that lists each partition dir after
every step from its commit point on: the states ``S_0 .. S_n`` recorded there are the
oracle. ``swap_state`` must accept each of them (with ``k`` never going back), and of a
listing that mixes two states -- what a listing taken while renames ran can show -- it
must accept exactly those whose ``.log`` names are a recorded state's and whose index
names are among that state's (a segment read without one of its indexes reads the same
records).
"""
from __future__ import annotations

import os
import random
import shutil

import pytest

from spark_kafkalog.log.maintain import compact_topic
from spark_kafkalog.log.model.swap import swap_state, swap_steps
from spark_kafkalog.log.files import journal as jr
from tests.log.logbuilder import LogDirBuilder
from tests.log.test_compact import T0, build
from tests.log.test_compact_crash import SETTINGS
from tests.log.test_crash import FS

_KINDS = (".log", ".index", ".timeindex", ".txnindex")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """``{partition: (groups, [names after each step from the commit on])}``."""
    root = tmp_path_factory.mktemp("swap") / "log"
    b = LogDirBuilder(root)
    build(root, 21, 0, b)
    build(root, 22, 1, b)
    b.write()
    out = {}

    def hook(point):
        if point == "committed":
            pending = jr.load(FS, str(root), "c").pending
            out.update({q: (gs, []) for q, gs in pending.replace.items()})
        for q, (_, states) in out.items():
            states.append(frozenset(os.listdir(root / f"c-{q}")))

    compact_topic(str(root), "c", SETTINGS, now_ms=T0, fault=hook)
    assert set(out) == {0, 1} and all(len(gs) >= 2 for gs, _ in out.values())
    yield out
    shutil.rmtree(root)


def _relevant(groups, names) -> tuple[frozenset, frozenset]:
    """(.log names, index names) of the groups' segment files in ``names``, any form."""
    bases = {f"{int(g[0]):020d}" for g in groups} | {f"{int(o):020d}" for g in groups
                                                     for o in g[1]}
    logs, idx = set(), set()
    for n in names:
        stem, _, rest = n.partition(".")
        kind = "." + rest.split(".")[0]
        if stem not in bases or kind not in _KINDS or n.endswith(".deleted"):
            continue
        (logs if kind == ".log" else idx).add(n)
    return frozenset(logs), frozenset(idx)


def _oracle(groups, states, names) -> bool:
    logs, idx = _relevant(groups, names)
    return any(logs == sl and idx <= si for sl, si in (_relevant(groups, s) for s in states))


def test_steps_follow_finish_replace(recorded):
    for groups, states in recorded.values():
        steps = swap_steps(groups)
        # every .log the steps name moves: swap, delete and final renames of each
        assert [s for s in steps if s[2] == ".log" and s[0] == "final"] == [
            ("final", b, ".log") for b in sorted((int(g[0]) for g in groups), reverse=True)]
        assert len(steps) == 4 * (2 * len(groups) + sum(len(g[1]) for g in groups))


def test_every_recorded_state_is_recognised_in_order(recorded):
    for groups, states in recorded.values():
        ks = [swap_state(groups, s) for s in states]
        assert None not in ks, ks
        assert ks == sorted(ks) and ks[0] == 0
        assert ks[-1] > ks[0]


def test_listings_torn_by_a_rename_are_refused(recorded):
    rejected = 0
    for groups, states in recorded.values():
        for a, b in zip(states, states[1:]):
            for torn in (a | b, a & b):        # a renamed file under both names, or neither
                got = swap_state(groups, torn) is not None
                assert got == _oracle(groups, states, torn), sorted(torn ^ a)
                rejected += not got
    assert rejected >= 8


def test_mixtures_of_two_states_match_the_oracle(recorded):
    rng = random.Random(7)
    seen = {True: 0, False: 0}
    for groups, states in recorded.values():
        for _ in range(400):
            i, j = sorted(rng.sample(range(len(states)), 2))
            a, b = states[i], states[j]
            names = (a & b) | {n for n in a ^ b if rng.random() < 0.5}
            got = swap_state(groups, names) is not None
            assert got == _oracle(groups, states, names), (i, j, sorted(names ^ a))
            seen[got] += 1
    assert seen[True] >= 20 and seen[False] >= 20

"""The file names a committed compaction's segment swap leaves in a partition dir.

``write/replace.py`` (``finish_replace``) swaps one partition's groups
(``[[new base, [old bases]], ...]``) by renames alone, in this order (:func:`swap_steps`):
each group's new files ``.cleaned`` -> ``.swap`` (groups by decreasing base, indexes
before the ``.log``); the old segments' files to their ``.deleted`` names (same group
order, each old segment's ``.log`` last); each ``.swap`` to its final name (``.log``
first). Recovery redoes the rest of the same sequence, so while the journal holds the
committed swap the dir is always in a state ``S_k``: the first ``k`` renames done.
:func:`swap_state` tells whether a listing shows one. Pure: names in, answer out.
"""
from __future__ import annotations

from typing import Collection, Sequence

__all__ = ["SEGMENT_SUFFIXES", "FINAL_ORDER", "CLEANED", "SWAP", "swap_steps", "swap_state"]

#: a segment's files in the order ``.cleaned -> .swap`` and deletion rename them (the
#: ``.log`` last: while it is not there, the indexes under its name mean nothing)
SEGMENT_SUFFIXES = (".index", ".timeindex", ".txnindex", ".log")
#: the order ``.swap -> final`` renames them (the ``.log`` first: it makes the segment)
FINAL_ORDER = (".log", ".index", ".timeindex", ".txnindex")
CLEANED = ".cleaned"
SWAP = ".swap"


def _name(base: int, suffix: str) -> str:
    return f"{base:020d}{suffix}"


def swap_steps(groups: Sequence) -> list[tuple[str, int, str]]:
    """The renames of one partition's swap in order: ``("swap", base, suffix)`` for
    ``.cleaned -> .swap``, ``("delete", old base, suffix)`` for a final name -> its
    ``.deleted`` name, ``("final", base, suffix)`` for ``.swap -> final``. A rename whose
    file does not exist (an index a segment lacks) is skipped and changes nothing."""
    ordered = sorted(((int(g[0]), [int(b) for b in g[1]]) for g in groups),
                     key=lambda g: -g[0])
    return ([("swap", b, s) for b, _ in ordered for s in SEGMENT_SUFFIXES]
            + [("delete", o, s) for _, old in ordered for o in old for s in SEGMENT_SUFFIXES]
            + [("final", b, s) for b, _ in ordered for s in FINAL_ORDER])


def _meet(allowed: list, spans: list) -> list:
    return [(max(a, c), min(b, d)) for a, b in allowed for c, d in spans
            if max(a, c) <= min(b, d)]


def swap_state(groups: Sequence, names: Collection[str]) -> int | None:
    """The smallest ``k`` such that the segment files ``names`` (one directory listing,
    as file names) are those of ``S_k``, save index files it may lack; None when no
    ``k`` fits. Every ``.log`` of the groups exists in each state under exactly one name
    (so its presence and absence both count); an index may never have existed (a
    segment without a ``.txnindex``), so only its presence counts: a listing without
    an index of ``S_k`` reads that segment without it, as the same records.
    ``.deleted`` names and files of other bases are not looked at (a swap never
    renames those; a reader ignores ``.deleted`` files). A listing taken while a rename
    ran can show a file under both names or under neither: with a ``.log`` either fits
    no state, and so does an index under both names."""
    steps = swap_steps(groups)
    n = len(steps)
    pos = {step: i + 1 for i, step in enumerate(steps)}    # S_k has step i done iff k >= i+1
    listed = set(names)
    news = {int(g[0]) for g in groups}
    allowed = [(0, n)]
    for b in sorted(news):
        for s in SEGMENT_SUFFIXES:
            p1, p3 = pos[("swap", b, s)], pos[("final", b, s)]
            is_log = s == ".log"
            if _name(b, s + CLEANED) in listed:
                allowed = _meet(allowed, [(0, p1 - 1)])
            elif is_log:
                allowed = _meet(allowed, [(p1, n)])
            if _name(b, s + SWAP) in listed:
                allowed = _meet(allowed, [(p1, p3 - 1)])
            elif is_log:
                allowed = _meet(allowed, [(0, p1 - 1), (p3, n)])
    for _, old in ((int(g[0]), [int(b) for b in g[1]]) for g in groups):
        for o in old:
            for s in SEGMENT_SUFFIXES:
                p2 = pos[("delete", o, s)]
                p3 = pos.get(("final", o, s)) if o in news else None
                if _name(o, s) in listed:       # the old file, or the new one under its name
                    allowed = _meet(allowed, [(0, p2 - 1)] + ([(p3, n)] if p3 else []))
                elif s == ".log":
                    allowed = _meet(allowed, [(p2, (p3 or n + 1) - 1)])
    for b in news - {int(o) for g in groups for o in g[1]}:
        for s in SEGMENT_SUFFIXES:          # a new base no old segment had (not made so)
            p3 = pos[("final", b, s)]
            if _name(b, s) in listed:
                allowed = _meet(allowed, [(p3, n)])
            elif s == ".log":
                allowed = _meet(allowed, [(0, p3 - 1)])
    return min((lo for lo, _ in allowed), default=None)

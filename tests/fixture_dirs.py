"""Where the real-broker fixtures are: one rule for the tests (``tests/conftest.py``) and
the fuzz harness (``fuzz/targets.py``). The fixtures live outside the repo, in
``shared/fixtures/real-broker`` beside a clone; a git worktree sits deeper, so every
directory above the repo is tried. Nothing here imports pytest or the package."""
from __future__ import annotations

from pathlib import Path

FIXTURE_DIR = Path("shared") / "fixtures" / "real-broker"


def real_broker_dir(repo: Path) -> Path:
    """``../shared/fixtures/real-broker`` from ``repo``, or from the nearest directory above
    it that has one; when none has, the path beside ``repo`` (for the message)."""
    for d in repo.parents:
        if (d / FIXTURE_DIR).is_dir():
            return (d / FIXTURE_DIR).resolve()
    return repo.parent / FIXTURE_DIR

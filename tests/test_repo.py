"""What a fresh clone gets: no symlink leaving the tree and nothing the repo ignores.

A symlink committed by mistake (a worktree's ``.cache`` pointing at another checkout) made
a fresh clone's ``make test`` fail before any test ran; these checks catch it in the suite.
The one deliberate link, ``jobs`` -> ``spark_kafkalog/jobs``, is relative and stays inside.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(),
                                reason="needs git and a checkout")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout


def test_tracked_symlinks_stay_inside_the_tree():
    links = [line.split("\t", 1)[1] for line in _git("ls-files", "-s").splitlines()
             if line.startswith("120000 ")]
    assert links == ["jobs"], f"unexpected tracked symlinks: {links}"
    for link in links:
        target = os.readlink(REPO / link)
        resolved = (REPO / link).resolve()
        assert not os.path.isabs(target) and resolved.is_relative_to(REPO) \
            and resolved.exists(), f"{link} -> {target} leaves the tree or dangles"


def test_nothing_tracked_is_ignored():
    ignored = _git("ls-files", "-ci", "--exclude-standard").split()
    assert ignored == [], f"tracked files the repo's .gitignore excludes: {ignored}"


def test_make_says_before_it_apt_installs():
    """Each Makefile recipe that runs ``apt-get install`` (make test's browser, kcat and
    fuzz-kernels prerequisites, with sudo) first echoes what it installs."""
    text = (REPO / "Makefile").read_text().replace("\\\n", " ")
    recipes, current = [], None
    for line in text.splitlines():
        if line.startswith("\t") and current is not None:
            current.append(line)
        elif re.match(r"^[^\s#=][^=]*:", line):
            current = []
            recipes.append(current)
        else:
            current = None
    installing = 0
    for lines in recipes:
        body = "\n".join(lines)
        if "apt-get install" not in body:
            continue
        installing += 1
        said = body.find("installing Debian's")
        assert "echo" in body[:said] and 0 <= said < body.index("apt-get update"), body[:200]
    assert installing >= 3

"""What README.md tells a new user to run works as written: every ``pip install`` names
something that exists (the package is not on PyPI: a clone, a built wheel, a git URL),
the jobs' example commands parse, the job count matches ``kafkalog job --list``, and the
two set-up commands (``make run``, ``make test``) are targets of the Makefile."""
from __future__ import annotations

import re
import shlex

import pytest

from spark_kafkalog.jobs import JOBS
from tests.conftest import REPO

README = (REPO / "README.md").read_text()
#: what pip may install by name from PyPI (our package is not there)
PYPI = {"build", "venv-pack"}


def _commands() -> list[str]:
    """The shell commands of README's ``sh`` blocks, continuation lines joined."""
    out = []
    for block in re.findall(r"```sh\n(.*?)```", README, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #", 1)[0].strip()
            if line and not line.startswith("#"):
                out.extend(p.strip() for p in line.split("&&"))
    return out


def _pip_installs() -> list[list[str]]:
    return [shlex.split(c)[2:] for c in _commands() if c.startswith("pip install")]


def test_every_pip_install_names_something_that_exists():
    installs = _pip_installs()
    assert installs, "README installs nothing"
    first = installs[0]
    assert first == [".[spark]"], f"the first install line is {first}, not a clone's"
    for words in installs:
        for word in words:
            if word.startswith("-"):
                continue
            ok = (word.split("[")[0] in (".", *PYPI)
                  or word.startswith("$(ls dist/spark_kafkalog-")     # the built wheel
                  or re.fullmatch(r"spark-kafkalog(\[\w+\])? @ git\+\S+", word))
            assert ok, f"`pip install {' '.join(words)}`: {word!r} is not installable " \
                       "(spark-kafkalog is not on PyPI)"


def test_the_job_count_and_sample_log_commands():
    words = ["Seven", "Eight", "Nine", "Ten", "Eleven", "Twelve"]
    assert f"{words[len(JOBS) - 7]} jobs come with the package" in README, len(JOBS)
    assert "kafkalog job make_sample_log --output sample/kafka-logs" in README


@pytest.mark.parametrize("line", [c for c in _commands() if c.startswith(
    ("kafkalog job make_sample_log", "kafkalog job export_parquet"))])
def test_readme_job_commands_parse(line):
    import importlib

    words = shlex.split(line, comments=True)
    if "..." in words:
        pytest.skip("an elided example")
    module = importlib.import_module(f"spark_kafkalog.jobs.{words[2]}")
    parse = getattr(module, "parse_args", None)
    if parse is not None:
        parse(words[3:])
    else:                       # make_sample_log: its parser is main's; --help exits 0
        with pytest.raises(SystemExit) as e:
            module.main(words[3:] + ["--help"])
        assert e.value.code == 0


def test_setup_commands_are_makefile_targets():
    makefile = (REPO / "Makefile").read_text()
    for target in ("run", "test"):
        assert f"\nmake {target}" in README
        assert re.search(rf"^{target}:", makefile, re.M), target

"""README's flag table (Jobs, Flags) against every job's parser: a flag the table marks
for a job is a visible flag of that job, and nothing else is; the old spellings the
README lists are exactly each parser's hidden aliases. No Spark needed."""
import argparse
import importlib
import re

import pytest

from spark_kafkalog.jobs import JOBS
from tests.conftest import REPO

README = (REPO / "README.md").read_text()
USER_JOBS = [j for j in JOBS if j != "make_sample_log"]


def _table(header_start: str) -> list[list[str]]:
    lines = README.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(header_start))
    rows = []
    for ln in lines[start:]:
        if not ln.startswith("|"):
            break
        rows.append([c.strip() for c in ln.strip().strip("|").split("|")])
    return rows


def readme_flags() -> dict[str, set[str]]:
    header, _rule, *rows = _table("| flag |")
    jobs = [re.fullmatch(r"\[\w+\]\(jobs/(\w+)\.py\)", c).group(1) for c in header[1:-1]]
    out: dict[str, set[str]] = {j: set() for j in jobs}
    for row in rows:
        flag = row[0].strip("`")
        assert len(row) == len(header), row
        for job, cell in zip(jobs, row[1:-1]):
            assert cell in ("", "✓"), (flag, job, cell)
            if cell:
                out[job].add(flag)
    return out


def parser_flags(job: str) -> tuple[set[str], dict[str, str]]:
    ap = importlib.import_module(f"spark_kafkalog.jobs.{job}").build_parser()
    visible = {o for a in ap._actions if a.help != argparse.SUPPRESS
               for o in a.option_strings if o.startswith("--") and o != "--help"}
    return visible, dict(ap.aliases)


def test_the_table_names_every_job():
    assert sorted(readme_flags()) == sorted(USER_JOBS)


@pytest.mark.parametrize("job", USER_JOBS)
def test_each_jobs_parser_agrees_with_the_readme_table(job):
    visible, _aliases = parser_flags(job)
    table = readme_flags()[job]
    assert visible - table == set(), f"{job}: flags missing from the README table"
    assert table - visible == set(), f"{job}: README lists flags the parser lacks"


def test_old_spellings_are_the_parsers_hidden_aliases():
    header, _rule, *rows = _table("| job | old spelling | now |")
    listed = {(job, old.strip("`"), new.strip("`")) for job, old, new in rows}
    have = {(job, old, new) for job in USER_JOBS
            for old, new in parser_flags(job)[1].items()}
    # value spellings and compact's file form are handled after parsing, not as aliases
    special = {("export_parquet", "--mode error", "--mode errorifexists"),
               ("compact", "--topic-config FILE", "--config-file FILE")}
    assert listed - special == have
    assert special <= listed


def test_same_flag_same_shape_everywhere():
    """A flag several jobs have takes a value in all of them or in none, with the same
    choices (``--isolation-level``, ``--mode``, ``--compression-type``)."""
    shapes: dict[str, set] = {}
    for job in USER_JOBS:
        ap = importlib.import_module(f"spark_kafkalog.jobs.{job}").build_parser()
        for a in ap._actions:
            for o in a.option_strings:
                # --partitions: import's takes TOPIC=N per topic written (repeatable),
                # copy's is the one count every copied topic is re-partitioned to
                if a.help == argparse.SUPPRESS or o in ("--help", "--topic", "--mode",
                                                        "--partitions"):
                    continue
                shapes.setdefault(o, set()).add(
                    (a.nargs, tuple(a.choices or ()), type(a).__name__))
    assert {o: s for o, s in shapes.items() if len(s) > 1} == {}


@pytest.mark.parametrize("job", USER_JOBS)
def test_usage_shows_required_flags_as_required(job):
    """A flag the parser checks after parsing (so that an old spelling can stand in for
    it) is still shown as required: ``--output OUT``, not ``[--output OUT]``."""
    ap = importlib.import_module(f"spark_kafkalog.jobs.{job}").build_parser()
    usage = " ".join(ap.format_usage().split())
    for flag in ap.required_flags.values():
        assert re.search(rf"(^|[ |]){re.escape(flag)}( [A-Z_]+)?( |$)", usage), (flag, usage)
        assert f"[{flag}" not in usage, (flag, usage)
    assert not any(a.required for a in ap._actions if a.dest in ap.required_flags)

"""README's parity tables ("`kafkalog cat` and kcat's consumer flags", "`kafkalog dump` and
kafka-dump-log's flags") against the argparse parsers of ``kafkalog cat`` and ``kafkalog
dump``: every visible flag of the parser is in its table, and every flag the table says
kafkalog takes is one the parser has; the flags a table says are rejected are not. No
broker, no Spark.

A table's first column names the other tool's flags in backticks (```-o N``` names ``-o``),
our spellings of the same flag in parentheses (``(`--offset`)``); the row ``ours`` lists
kafkalog's own flags in its second column. A row whose second column says "rejected as
unknown" names flags kafkalog does not take."""
import argparse
import re

import pytest

from spark_kafkalog.cli import _parser
from tests.conftest import REPO

README = (REPO / "README.md").read_text()
TABLES = {"cat": "### `kafkalog cat` and kcat's consumer flags",
          "dump": "### `kafkalog dump` and kafka-dump-log's flags"}
#: the second column of a row of flags kafkalog does not take
REJECTED = "rejected as unknown"


def _rows(heading: str) -> list[list[str]]:
    """The table right below ``heading``: its rows (header and rule left out), each a list
    of cells split at unescaped ``|`` (``\\|`` in a cell is a literal bar)."""
    lines = README.splitlines()
    start = lines.index(heading) + 1
    while not lines[start].startswith("|"):
        assert not lines[start].startswith("#"), f"no table under {heading!r}"
        start += 1
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])])
    header, rule, *body = rows
    assert len(header) == 2 and set(rule[0]) <= {"-", ":"}, header
    assert all(len(r) == 2 for r in body), [r for r in body if len(r) != 2]
    return body


def _flags(cell: str) -> set[str]:
    """The flags a cell names: the first word of each backticked span that starts with
    ``-`` (```-o s@TS``` is ``-o``, ```--max-bytes N``` is ``--max-bytes``)."""
    out = set()
    for span in re.findall(r"`([^`]+)`", cell):
        word = span.split()[0]
        if re.fullmatch(r"--?[A-Za-z][\w-]*", word):
            out.add(word)
    return out


def readme_flags(command: str) -> tuple[set[str], set[str]]:
    """(flags the table says ``kafkalog <command>`` takes, flags it says it rejects)."""
    taken, rejected = set(), set()
    for first, second in _rows(TABLES[command]):
        if first == "ours":
            found = _flags(second)
            assert found, f"the `ours` row of {command}'s table names no flag"
            taken |= found
            continue
        found = _flags(first)
        assert found, f"{command}'s table: a row without a flag: {first!r}"
        (rejected if REJECTED in second else taken).update(found)
    return taken, rejected


def parser_flags(command: str) -> set[str]:
    """The option strings of ``kafkalog <command>``'s visible arguments (``-h``/``--help``
    included; arguments with help=SUPPRESS left out)."""
    sub = _parser().commands[command]
    return {o for a in sub._actions if a.help != argparse.SUPPRESS for o in a.option_strings}


def hidden_flags(command: str) -> set[str]:
    sub = _parser().commands[command]
    return {o for a in sub._actions if a.help == argparse.SUPPRESS for o in a.option_strings}


@pytest.mark.parametrize("command", sorted(TABLES))
def test_every_parser_flag_is_in_the_table(command):
    taken, _rejected = readme_flags(command)
    assert parser_flags(command) - taken == set(), \
        f"kafkalog {command}: flags missing from README's table"


@pytest.mark.parametrize("command", sorted(TABLES))
def test_every_flag_the_table_takes_is_in_the_parser(command):
    taken, _rejected = readme_flags(command)
    assert taken - parser_flags(command) == set(), \
        f"README's {command} table lists flags kafkalog {command} does not take"


@pytest.mark.parametrize("command", sorted(TABLES))
def test_flags_the_table_rejects_are_not_in_the_parser(command):
    taken, rejected = readme_flags(command)
    assert rejected, f"README's {command} table names no rejected flag"
    assert rejected & taken == set()
    sub = _parser().commands[command]
    assert rejected & set(sub._option_string_actions) == set(), \
        f"README's {command} table says these are rejected, but kafkalog {command} takes them"


def test_hidden_flags_stay_out_of_the_tables():
    for command in TABLES:
        taken, rejected = readme_flags(command)
        assert hidden_flags(command) & (taken | rejected) == set(), command


def test_the_version_the_tables_point_to():
    """Both tables send ``--version`` / kcat's ``-V`` to ``kafkalog --version``."""
    top = _parser()
    assert "--version" in top._option_string_actions
    for command, heading in TABLES.items():
        rows = _rows(heading)
        assert any("`kafkalog --version`" in second for _first, second in rows), command


def test_the_dump_table_names_every_flag_of_kafkas_tool():
    """Every flag of Kafka 4.4's kafka-dump-log.sh (its --help) has a row: the table is
    the whole tool, not a sample."""
    kafka44 = {"--cluster-metadata-decoder", "--deep-iteration", "--files", "--help",
               "--index-sanity-check", "--key-decoder-class", "--max-bytes",
               "--max-message-size", "--offsets-decoder", "--print-data-log",
               "--remote-log-metadata-decoder", "--share-group-state-decoder",
               "--skip-record-metadata", "--transaction-log-decoder",
               "--value-decoder-class", "--verify-index-only", "--version"}
    named = set()
    for first, _second in _rows(TABLES["dump"]):
        if first != "ours":
            named |= _flags(first)
    assert kafka44 - named == set()

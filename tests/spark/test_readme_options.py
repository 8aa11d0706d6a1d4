"""The README's option tables against ``spark/options.py`` and ``spark/write_options.py``
(no Spark session): an option added to a parser without a row in the README fails here,
and so do documented defaults that are not the parser's."""
from __future__ import annotations

import re

import pytest

from spark_kafkalog.spark import options as o
from spark_kafkalog.spark import packing
from spark_kafkalog.spark import write_options as wo
from tests.conftest import REPO

README = (REPO / "README.md").read_text()


def _table(title: str) -> dict[str, tuple[list[str], str]]:
    """``{canonical name: ([names in the first cell], default cell)}`` of the table under
    the ``### title`` heading."""
    section = README.split(f"### {title}\n", 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        names = re.findall(r"`([^`]+)`", cells[0])
        rows[names[0]] = (names, cells[1])
    return rows


def _size(text: str) -> int:
    m = re.fullmatch(r"`(\d+)([kmg]?)`", text)
    assert m, text
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2)]


def test_every_read_option_has_a_row():
    documented = set(_table("Read options"))
    known = set(o._READ_NAMES.values()) | {"fs.*"}
    assert documented == known, (sorted(known - documented), sorted(documented - known))


def test_every_write_option_and_alias_has_a_row():
    rows = _table("Write options")
    from spark_kafkalog.spark.typed_write import TYPED_WRITE_NAMES
    typed = {r: names for r, (names, _) in rows.items() if r in TYPED_WRITE_NAMES.values()}
    assert {n for names in typed.values() for n in names} == set(TYPED_WRITE_NAMES.values())
    assert set(rows) - set(typed) == set(wo._WRITE_ALIASES) | {"fs.*"}
    for canon, aliases in wo._WRITE_ALIASES.items():
        spelled = {n.lower() for n in rows[canon][0]}
        assert set(aliases) <= spelled, (canon, sorted(set(aliases) - spelled))


def test_documented_read_defaults_are_the_parsers():
    rows = _table("Read options")
    parsed = o.parse_read_options({"path": "/l", "subscribe": "t"})
    assert rows["windowBytes"][1] == "`16m`" and _size("`16m`") == parsed.window_bytes
    assert _size(rows["maxPartitionBytes"][1]) == parsed.max_partition_bytes
    # by filesystem when not given
    assert parsed.open_cost_bytes is None
    assert rows["openCostInBytes"][1] == "`16k` on local disk, `4m` elsewhere"
    assert [_size(f"`{v}`") for v in ("16k", "4m")] == [packing.default_open_cost(True),
                                                       packing.default_open_cost(False)]
    for name, value in [("failOnDataLoss", parsed.fail_on_data_loss),
                        ("includeHeaders", parsed.include_headers),
                        ("readPastHighWatermark", parsed.read_past_high_watermark),
                        ("memoryMap", parsed.memory_map)]:
        assert rows[name][1] == f"`{str(value).lower()}`", name
    assert rows["onCorruption"][1] == f"`{parsed.on_corruption}`"
    assert rows["kafka.isolation.level"][1] == f"`{parsed.isolation_level}`"
    assert rows["startingOffsets"][1].startswith("`earliest` (batch)")
    assert isinstance(parsed.starting, o.Earliest) and isinstance(parsed.ending, o.Latest)
    assert isinstance(o.parse_read_options({"path": "/l", "subscribe": "t"},
                                           streaming=True).starting, o.Latest)
    for name in ("subscribe", "minPartitions", "maxRecordsPerPartition", "startingTimestamp"):
        assert rows[name][1] == "", name                    # no default: unset


def test_documented_write_defaults_are_the_parsers():
    rows = _table("Write options")
    w = wo.parse_write_options({"path": "/l"})
    assert rows["compression"][1] == f"`{w.compression}`"
    assert _size(rows["batchSize"][1]) == w.batch_size
    assert _size(rows["segmentBytes"][1]) == w.segment_bytes
    assert _size(rows["indexIntervalBytes"][1]) == w.index_interval_bytes
    assert rows["fsync"][1] == f"`{str(w.fsync).lower()}`"
    assert rows["syncMethod"][1] == f"`{w.sync_method}`"
    assert rows["saveMode"][1] == f"`{w.save_mode}`"
    # a new topic's count: from the rows' partition column, else 1
    assert w.partitions is None
    assert rows["partitions"][1] == "the largest `partition` written + 1, else `1`"
    assert rows["allowInternalTopic"][1] == f"`{str(w.allow_internal_topic).lower()}`"


@pytest.mark.parametrize("title", ["Read options", "Write options"])
def test_every_row_says_what_the_option_does(title):
    section = README.split(f"### {title}\n", 1)[1].split("\n#", 1)[0]
    for line in section.splitlines():
        if line.startswith("| `"):
            meaning = line.strip().strip("|").split("|")[2].strip()
            assert len(meaning) > 10, line


def test_readme_links_only_to_files_in_the_repo():
    for target in re.findall(r"\]\(([^)]+)\)", README):
        if target.startswith(("http://", "https://", "#")):
            continue
        assert (REPO / target).exists(), target
        assert not target.startswith(".."), target

"""The report's HTML page in a real headless Chromium (Debian's ``chromium`` package,
installed by ``make browser``, which ``make test`` runs): it loads from a file with no
network, its script runs, and every chart bar holds and draws the report's numbers.

Chromium's ``--dump-dom`` prints the DOM after the page's script ran: the script marks
the root ``data-ready`` and records each bar's drawn size (``data-drawn``); the test
compares each bar's ``data-value`` with the JSON report and its drawn size with the
value's share of its chart's largest value. ``--screenshot`` must produce a PNG of the
page.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import defaultdict
from datetime import datetime, timezone
from html.parser import HTMLParser

import pytest

from spark_kafkalog.jobs.make_sample_log import make_sample_log
from spark_kafkalog.cli import main as kafkalog
from spark_kafkalog.report_html import MAX_BARS
from tests.log.logbuilder import build_rich_partition, flip_byte

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def chromium(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail("chromium is not installed: run `make browser` (make test does)")
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                           "--no-first-run", "--disable-extensions", "--hide-scrollbars",
                           *args], capture_output=True, timeout=timeout)


class _Bars(HTMLParser):
    def __init__(self):
        super().__init__()
        self.bars, self.root, self.external = [], {}, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "html":
            self.root = a
        if tag == "rect" and "bar" in (a.get("class") or "").split():
            self.bars.append(a)
        for name in ("src", "href"):
            if a.get(name) and not a[name].startswith(("#", "data:")):
                self.external.append(a[name])


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """A log dir with two topics (one damaged), its report as JSON and HTML, and the DOM
    Chromium rendered from the HTML."""
    d = tmp_path_factory.mktemp("report")
    root = d / "logs"
    make_sample_log(root, records=24_000, partitions=3, segment_bytes=128 << 10, days=2)
    _, p = build_rich_partition(root)
    batch = p.batches[5]                            # the second uncompressed one
    flip_byte(root / "a.b-c_d-0" / f"{batch.segment:020d}.log", batch.position + 30)
    html, js = d / "report.html", d / "report.json"
    code = kafkalog(["report", str(root), "--html", str(html), "--output-json", str(js),
                     "--jobs", "2", "--no-progress"])
    assert code == 1                                # the damage is an error
    report = json.loads(js.read_text())
    r = chromium("--dump-dom", html.as_uri())
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    dom = _Bars()
    dom.feed(r.stdout.decode())
    return {"dir": d, "html": html, "report": report, "dom": dom}


def test_page_renders_with_its_script_and_no_network(page):
    dom = page["dom"]
    assert dom.root.get("data-ready") == "1", "the page's script did not run"
    assert int(dom.root["data-bars"]) == len(dom.bars) > 20
    assert dom.external == []                       # nothing fetched: no src/href out
    text = page["html"].read_text()
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in text


HOUR = 3_600_000


def label(ms: int, fmt: str) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime(fmt)


def _values(bars, chart, topic=None) -> dict[str, int]:
    return {b["data-key"]: int(b["data-value"]) for b in bars
            if b["data-chart"] == chart and (topic is None or b["data-topic"] == topic)}


def test_bars_hold_the_reports_numbers(page):
    report, bars = page["report"], page["dom"].bars
    assert _values(bars, "bytes-by-codec") == report["codec_bytes"]
    assert set(report["codec_bytes"]) >= {"none", "lz4", "zstd", "gzip", "snappy"}
    for t in report["topics"]:
        name = t["topic"]
        assert _values(bars, "partition-records", name) == t["partition_records"]
        assert _values(bars, "partition-bytes", name) == t["partition_bytes"]
        span_hours = (t["hours"][-1][0] - t["hours"][0][0]) // HOUR + 1
        per = "day" if span_hours > MAX_BARS else "hour"
        size = 24 * HOUR if per == "day" else HOUR
        fmt = "%Y-%m-%d" if per == "day" else "%Y-%m-%dT%H:00Z"
        want_r, want_b = defaultdict(int), defaultdict(int)
        first = t["hours"][0][0] // size * size
        last = t["hours"][-1][0] // size * size
        for b in range(first, last + size, size):       # every bucket has a bar, 0 or not
            want_r[label(b, fmt)] += 0
            want_b[label(b, fmt)] += 0
        for hour, recs, nbytes in t["hours"]:
            want_r[label(hour // size * size, fmt)] += recs
            want_b[label(hour // size * size, fmt)] += nbytes
        assert _values(bars, f"records-per-{per}", name) == want_r
        assert _values(bars, f"bytes-per-{per}", name) == want_b
    sample = next(t for t in report["topics"] if t["topic"] == "events")
    assert sample["records"] == 24_000
    # the rich partition's LogAppendTime batch (2027) spreads it over years: days
    assert any(b["data-chart"] == "records-per-day" for b in bars)
    assert any(b["data-chart"] == "records-per-hour" for b in bars)


def test_bars_are_drawn_to_scale(page):
    groups = defaultdict(list)
    for b in page["dom"].bars:
        groups[(b["data-chart"], b["data-topic"])].append(b)
    for (chart, topic), bars in groups.items():
        horizontal = chart == "bytes-by-codec"
        peak_v = max(int(b["data-value"]) for b in bars)
        sizes = [float(b["data-drawn"].split()[0 if horizontal else 1]) for b in bars]
        peak_px = max(sizes)
        assert peak_px > 50, (chart, topic)
        for b, px in zip(bars, sizes):
            share = int(b["data-value"]) / peak_v
            assert abs(px / peak_px - share) < 0.01 + 1 / peak_px, (chart, topic, b)


def test_problems_are_listed(page):
    report = page["report"]
    assert report["totals"]["errors"] >= 1
    text = page["html"].read_text()
    for f in report["problems"]:
        assert f["path"] in text and f["kind"] in text


def test_screenshot(page):
    shot = page["dir"] / "shot.png"
    r = chromium("--window-size=1000,1600", f"--screenshot={shot}", page["html"].as_uri())
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


class _Tables(HTMLParser):
    def __init__(self):
        super().__init__()
        self.right, self.width = {}, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "html":
            self.width = float(a["data-width"])
        if tag == "table":
            self.right[a.get("id")] = float(a["data-right"])


def test_tables_fit_a_1280_pixel_window(page):
    """At 1280 px (a laptop's window) the partition table, the widest, is drawn whole
    inside the page (it was 5 px wider than the window and cut off); a wider one still
    scrolls in its box rather than being cut."""
    r = chromium("--window-size=1280,900", "--dump-dom", page["html"].as_uri())
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    dom = _Tables()
    dom.feed(r.stdout.decode())
    assert dom.width == 1280 and set(dom.right) >= {"topics", "partitions"}
    for table, right in dom.right.items():
        assert right <= dom.width, (table, right)
    assert '<div class="wide"><table id="partitions"' in page["html"].read_text()

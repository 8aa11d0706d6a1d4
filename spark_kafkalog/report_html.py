"""The report (:mod:`spark_kafkalog.report`) as one self-contained HTML page: inline CSS,
inline SVG charts drawn here, a few lines of inline JavaScript (sortable tables); nothing
is fetched from the network, so the page opens anywhere, offline.

Charts, per topic: records per hour and bytes per hour (per day when a topic spans more
than :data:`MAX_BARS` hours), records and bytes per partition (skew, with the mean drawn);
and bytes by codec over every topic. Every bar is an SVG ``rect`` of class ``bar`` with
``data-chart``, ``data-topic``, ``data-key`` and ``data-value`` (the exact number it
draws), and a ``title`` a browser shows on hover; once the page has loaded, its script
records each bar's drawn size (``data-drawn``: width and height in CSS pixels) and sets
``data-ready`` on the root element.
"""
from __future__ import annotations

import html
from datetime import datetime, timezone

from spark_kafkalog._console import human_bytes, iso_ms

__all__ = ["render_html", "MAX_BARS"]

#: above this many hours a topic's time charts show days
MAX_BARS = 1500
DAY_MS = 86_400_000
_COLORS = {"records": "#4e79a7", "bytes": "#f28e2b", "codec": "#59a14f",
           "partition-records": "#7b6fb0", "partition-bytes": "#e15759"}


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _hour_label(ms: int, day: bool) -> str:
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%d") if day else dt.strftime("%Y-%m-%dT%H:00Z")


def _fmt(value: int, unit: str) -> str:
    return human_bytes(value) if unit == "bytes" else f"{value:,}"


def _bar_chart(chart: str, topic: str, items: list[tuple[str, int]], *, unit: str,
               color: str, mean: bool = False, width: int = 880, height: int = 230) -> str:
    """Vertical bars, one per (key, value), scaled to the largest value."""
    left, top, bottom, right = 70, 12, 42, 12
    pw, ph = width - left - right, height - top - bottom
    n = max(len(items), 1)
    peak = max((v for _, v in items), default=0) or 1
    step = pw / n
    gap = step * 0.15 if step > 4 else 0.0
    out = [f'<svg class="chart-svg" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img" xmlns="http://www.w3.org/2000/svg">',
           f'<line class="axis" x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}"/>',
           f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}"/>']
    for frac in (0.0, 0.5, 1.0):
        y = top + ph - frac * ph
        out.append(f'<text class="ylabel" x="{left - 6}" y="{y + 4:.1f}" '
                   f'text-anchor="end">{_e(_fmt(int(round(peak * frac)), unit))}</text>')
        if frac:
            out.append(f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{left + pw}" '
                       f'y2="{y:.1f}"/>')
    for i, (key, value) in enumerate(items):
        h = value / peak * ph
        x = left + i * step + gap / 2
        out.append(f'<rect class="bar" data-chart="{_e(chart)}" data-topic="{_e(topic)}" '
                   f'data-key="{_e(key)}" data-value="{int(value)}" x="{x:.2f}" '
                   f'y="{top + ph - h:.2f}" width="{max(step - gap, 0.5):.2f}" '
                   f'height="{h:.2f}" fill="{color}"><title>{_e(key)}: '
                   f'{_e(_fmt(value, unit))}</title></rect>')
    ticks = sorted({0, n - 1} | {round(k * (n - 1) / 4) for k in range(1, 4)}) if items else []
    for i in ticks:
        x = left + (i + 0.5) * step
        anchor = ("start" if i == 0 and n > 2 else "end" if i == n - 1 and n > 2
                  else "middle")
        x = left if anchor == "start" else left + pw if anchor == "end" else x
        out.append(f'<text class="xlabel" x="{x:.1f}" y="{top + ph + 16}" '
                   f'text-anchor="{anchor}">{_e(items[i][0])}</text>')
    if mean and items:
        avg = sum(v for _, v in items) / len(items)
        y = top + ph - avg / peak * ph
        out.append(f'<line class="mean" data-chart="{_e(chart)}" data-value="{avg:.3f}" '
                   f'x1="{left}" y1="{y:.2f}" x2="{left + pw}" y2="{y:.2f}"/>'
                   f'<text class="ylabel" x="{left + pw}" y="{y - 4:.2f}" text-anchor="end">'
                   f'mean {_e(_fmt(int(round(avg)), unit))}</text>')
    out.append("</svg>")
    return "".join(out)


def _hbar_chart(chart: str, items: list[tuple[str, int]], *, unit: str, color: str,
                width: int = 880) -> str:
    """Horizontal bars (one row per key), for a few categories such as codecs."""
    row, left, right = 28, 110, 150
    height = row * max(len(items), 1) + 10
    peak = max((v for _, v in items), default=0) or 1
    pw = width - left - right
    out = [f'<svg class="chart-svg" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img" xmlns="http://www.w3.org/2000/svg">']
    for i, (key, value) in enumerate(items):
        y = 5 + i * row
        w = value / peak * pw
        out.append(f'<text class="ylabel" x="{left - 8}" y="{y + 17}" text-anchor="end">'
                   f'{_e(key)}</text>'
                   f'<rect class="bar" data-chart="{_e(chart)}" data-topic="" '
                   f'data-key="{_e(key)}" data-value="{int(value)}" x="{left}" y="{y + 3}" '
                   f'width="{w:.2f}" height="{row - 8}" fill="{color}"><title>{_e(key)}: '
                   f'{_e(_fmt(value, unit))}</title></rect>'
                   f'<text class="vlabel" x="{left + w + 6:.2f}" y="{y + 17}">'
                   f'{_e(_fmt(value, unit))}</text>')
    out.append("</svg>")
    return "".join(out)


def _time_items(hours: list, column: int) -> tuple[list[tuple[str, int]], bool]:
    """(label, value) per hour, filling the hours with no data; per day past MAX_BARS."""
    if not hours:
        return [], False
    first, last = hours[0][0], hours[-1][0]
    day = (last - first) // 3_600_000 + 1 > MAX_BARS
    size = DAY_MS if day else 3_600_000
    values: dict[int, int] = {}
    for h in hours:
        b = h[0] // size * size
        values[b] = values.get(b, 0) + int(h[column])
    start = first // size * size
    return [(_hour_label(b, day), values.get(b, 0))
            for b in range(start, last // size * size + size, size)], day


def _figure(title: str, body: str, note: str = "") -> str:
    extra = f'<p class="note">{_e(note)}</p>' if note else ""
    return f'<figure class="chart"><figcaption>{_e(title)}</figcaption>{body}{extra}</figure>'


def _table(table_id: str, headers: list[str], rows: list[list], numeric: set[int]) -> str:
    head = "".join(f'<th data-col="{i}">{_e(h)}</th>' for i, h in enumerate(headers))
    body = []
    for r in rows:
        cells = []
        for i, v in enumerate(r):
            shown, key = v if isinstance(v, tuple) else (v, v)
            cls = ' class="num"' if i in numeric else ""
            sort = "" if key is None else f' data-sort="{_e(key)}"'
            cells.append(f"<td{cls}{sort}>{_e('-' if shown is None else shown)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    # in a box of the page's width that scrolls sideways: a wide table is never cut off
    return (f'<div class="wide"><table id="{table_id}" class="sortable"><thead><tr>{head}'
            f'</tr></thead><tbody>{"".join(body)}</tbody></table></div>')


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#222}
h1{margin:0 0 4px}h2{margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:110px}
.card b{display:block;font-size:20px}.bad b{color:#c0392b}
figure.chart{margin:12px 0 20px}figcaption{font-weight:600;margin-bottom:4px}
.axis{stroke:#555}.grid{stroke:#e5e5e5}.mean{stroke:#222;stroke-dasharray:5 4}
.ylabel,.xlabel,.vlabel{font-size:11px;fill:#444}.bar:hover{opacity:.75}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
.wide{overflow-x:auto;max-width:100%}
th,td{border:1px solid #ddd;padding:3px 6px}
th{background:#f4f4f4;cursor:pointer;vertical-align:bottom;min-width:3em}
td.num{text-align:right;font-variant-numeric:tabular-nums}.note{color:#666;font-size:12px}
.error{color:#c0392b}.warning{color:#b9770e}
"""

_JS = """
(function(){
  function val(td){var s=td.getAttribute('data-sort');var t=s===null?td.textContent:s;
    var n=parseFloat(t);return isNaN(n)||!/^-?[0-9.e+]+$/.test(t)?t.toLowerCase():n;}
  document.querySelectorAll('table.sortable th').forEach(function(th){
    th.addEventListener('click',function(){
      var table=th.closest('table'),body=table.tBodies[0],col=+th.getAttribute('data-col');
      var asc=th.getAttribute('data-dir')!=='asc';th.setAttribute('data-dir',asc?'asc':'desc');
      var rows=Array.prototype.slice.call(body.rows);
      rows.sort(function(a,b){var x=val(a.cells[col]),y=val(b.cells[col]);
        return (x<y?-1:x>y?1:0)*(asc?1:-1);});
      rows.forEach(function(r){body.appendChild(r);});});});
  var bars=document.querySelectorAll('rect.bar');
  bars.forEach(function(r){var b=r.getBoundingClientRect();
    r.setAttribute('data-drawn',b.width.toFixed(2)+' '+b.height.toFixed(2));});
  document.documentElement.setAttribute('data-bars',String(bars.length));
  // each table's drawn right edge and the page's width, for the browser test
  document.querySelectorAll('table').forEach(function(t){
    t.setAttribute('data-right',t.getBoundingClientRect().right.toFixed(1));});
  document.documentElement.setAttribute('data-width',
    String(document.documentElement.clientWidth));
  document.documentElement.setAttribute('data-ready','1');
})();
"""


def render_html(report: dict) -> str:
    """The page (a str of HTML) for a report built by
    :func:`spark_kafkalog.report.build_report`."""
    tot = report["totals"]
    cards = [("topics", f"{tot['topics']:,}"), ("partitions", f"{tot['partitions']:,}"),
             ("segments", f"{tot['segments']:,}"), ("size", human_bytes(tot["size_bytes"])),
             ("records", f"{tot['records']:,}"), ("errors", f"{tot['errors']:,}"),
             ("warnings", f"{tot['warnings']:,}")]
    parts = ['<!doctype html><html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>Kafka log report: {_e(', '.join(report['roots']) or 'log dir')}</title>",
             f"<style>{_CSS}</style></head><body>",
             '<header><h1>Kafka log report</h1>',
             f'<p>{_e(", ".join(report["roots"]))} &middot; generated '
             f'{_e(report["generated_at"])}</p></header>',
             '<section class="cards" id="totals">']
    for label, value in cards:
        bad = " bad" if label in ("errors", "warnings") and value != "0" else ""
        parts.append(f'<div class="card{bad}" data-total="{label}"><b>{_e(value)}</b>'
                     f'{_e(label)}</div>')
    parts.append("</section>")
    codecs = list(report["codec_bytes"].items())
    parts.append('<section id="codecs"><h2>Bytes by codec</h2>')
    parts.append(_figure("Bytes by codec (all topics)",
                         _hbar_chart("bytes-by-codec", codecs, unit="bytes",
                                     color=_COLORS["codec"])))
    parts.append("</section>")
    for t in report["topics"]:
        name = t["topic"]
        parts.append(f'<section class="topic" data-topic="{_e(name)}"><h2>{_e(name)}</h2>')
        parts.append(f'<p>{t["partitions"]} partitions, {t["segments"]} segments, '
                     f'{_e(human_bytes(t["size_bytes"]))}, {t["records"]:,} records, '
                     f'{_e(iso_ms(t["first_timestamp"]))} .. {_e(iso_ms(t["max_timestamp"]))}'
                     '</p>')
        for col, kind, title in ((1, "records", "Records"), (2, "bytes", "Bytes")):
            items, day = _time_items(t["hours"], col)
            per = "day" if day else "hour"
            parts.append(_figure(
                f"{title} per {per}",
                _bar_chart(f"{kind}-per-{per}", name, items, unit=kind,
                           color=_COLORS[kind]),
                "bytes count in the hour of each batch's max timestamp"
                if kind == "bytes" else ""))
        for kind, key, title, unit in (
                ("partition-records", "partition_records", "Records per partition", "records"),
                ("partition-bytes", "partition_bytes", "Bytes per partition", "bytes")):
            items = [(p, v) for p, v in sorted(t[key].items(), key=lambda kv: int(kv[0]))]
            skew = t["skew_records" if unit == "records" else "skew_bytes"]
            parts.append(_figure(f"{title} (skew: max / mean = "
                                 f"{'-' if skew is None else skew})",
                                 _bar_chart(kind, name, items, unit=unit,
                                            color=_COLORS[kind], mean=True)))
        parts.append("</section>")
    parts.append('<section id="topic-table"><h2>Topics</h2>')
    parts.append(_table("topics", [
        "topic", "partitions", "segments", "bytes", "records", "first", "last", "codecs",
        "distinct keys ~", "compaction ratio", "records skew", "aborted txns", "problems"],
        [[t["topic"], t["partitions"], t["segments"],
          (human_bytes(t["size_bytes"]), t["size_bytes"]), (f"{t['records']:,}", t["records"]),
          iso_ms(t["first_timestamp"]), iso_ms(t["max_timestamp"]),
          ", ".join(t["codec_bytes"]), t["distinct_keys"], t["compaction_ratio"],
          t["skew_records"], t["aborted_transactions"], t["errors"] + t["warnings"]]
         for t in report["topics"]], {1, 2, 3, 4, 8, 9, 10, 11, 12}))
    parts.append('</section><section id="partition-table"><h2>Partitions</h2>')
    parts.append(_table("partitions", [
        "partition", "segments", "bytes", "records", "log start", "log end", "first", "last",
        "codecs", "producers", "committed txns", "aborted txns", "distinct keys ~",
        "compaction ratio", "problems"],
        [[(f"{s['topic']}-{s['partition']}", f"{s['topic']}/{s['partition']:010d}"),
          s["segments"], (human_bytes(s["size_bytes"]), s["size_bytes"]),
          (f"{s['records']:,}", s["records"]), s["log_start_offset"], s["log_end_offset"],
          iso_ms(s["first_timestamp"]), iso_ms(s["max_timestamp"]),
          ", ".join(s["codec_bytes"]), s["producers"], s["committed_transactions"],
          s["aborted_transactions"], s["distinct_keys"], s["compaction_ratio"],
          s["errors"] + s["warnings"]] for s in report["partitions"]],
        {1, 2, 3, 4, 5, 9, 10, 11, 12, 13, 14}))
    parts.append(f'</section><section id="problems"><h2>Problems '
                 f'({len(report["problems"])})</h2>')
    if report["problems"]:
        parts.append(_table("problem-table", ["severity", "kind", "partition", "path",
                                              "position", "offset", "message"],
                            [[f["severity"], f["kind"], f"{f['topic']}-{f['partition']}",
                              f["path"], f["position"], f["offset"], f["message"]]
                             for f in report["problems"]], {4, 5}))
    else:
        parts.append("<p>None: every check of <code>kafkalog verify</code> passed.</p>")
    parts.append(f"</section><script>{_JS}</script></body></html>\n")
    return "".join(parts)

"""One self-contained HTML file: the summary of what needs a look, then every section with
its figure (an embedded PNG) and its tables. Styles are inline and nothing is fetched, so
the file opens anywhere, offline, and can be mailed."""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any

from streamdissect.protocols import registry
from streamdissect.report.sections import ANOMALIES, OTHER_SECTIONS, SECTIONS
from streamdissect.report.summary import findings
from streamdissect.report.text import cell, duration, missing, plural, wall
from streamdissect.tables.convert import release_free_memory

DPI = 100
MAX_TABLE_ROWS = 100  # rows of a table shown; the rest are counted

STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0;
       color: #1d1d1f; background: #f6f7f9; }
header, main { max-width: 1060px; margin: 0 auto; padding: 0 20px; }
header { padding-top: 18px; }
h1 { font-size: 24px; margin: 8px 0 4px; }
h2 { font-size: 19px; margin: 0 0 6px; }
.meta { color: #555; margin: 0 0 10px; font-size: 14px; }
nav { margin: 8px 0 14px; font-size: 14px; }
nav a { margin-right: 12px; color: #0b57d0; text-decoration: none; }
section { background: #fff; border: 1px solid #dde1e6; border-radius: 8px; padding: 14px 18px;
          margin: 0 0 16px; }
.about { color: #444; font-size: 14px; margin: 0 0 8px; }
figure { margin: 6px 0; }
figure img { max-width: 100%; height: auto; display: block; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 12px; margin: 8px 0; }
th, td { border-bottom: 1px solid #e3e6ea; padding: 3px 8px; text-align: right;
         white-space: nowrap; }
th { background: #f0f2f5; }
td.text, th.text { text-align: left; white-space: normal; min-width: 6em; max-width: 30em; }
.more { color: #666; font-size: 12px; }
ul.findings { list-style: none; padding: 0; margin: 0; }
ul.findings li { padding: 7px 10px; margin: 4px 0; border-left: 5px solid #999;
                 background: #fafafa; font-size: 14px; }
li.problem { border-color: #d62728 !important; background: #fdf0f0 !important; }
li.look { border-color: #ff7f0e !important; background: #fff6ec !important; }
li.note { border-color: #1f77b4 !important; }
li.fine { border-color: #2ca02c !important; background: #f1f9f1 !important; }
.level { font-size: 11px; text-transform: uppercase; color: #666; margin-right: 6px; }
footer { color: #777; font-size: 12px; text-align: center; padding: 10px 0 24px; }
"""

ANOMALY_ABOUT = ('<p class="about">What the capture itself got wrong or left out: TCP gaps, '
                 "retransmissions, out-of-order segments, resynchronisation, malformed or "
                 "truncated frames, limits reached.</p>")

# Tables under the figures: (table, [(column, heading, how to show it)]).
TIME, TEXT, MS = "time", "text", "ms"
TABLES_OF = {
    "connections": [("connections", [
        ("connection", "connection", TEXT), ("user", "user", TEXT), ("vhost", "vhost", TEXT),
        ("start_ns", "start", TIME), ("end_ns", "end", TIME), ("handshake_ms", "handshake ms", None),
        ("heartbeat", "heartbeat s", None), ("frames_c2s", "frames →", None),
        ("frames_s2c", "frames ←", None), ("missed_heartbeat_gaps", "missed heartbeats", None),
        ("closed_by", "closed by", TEXT), ("close_code", "close code", None),
        ("close_reason", "reason", TEXT), ("tcp_end", "TCP end", TEXT)])],
    "latency": [("latency", [
        ("command", "command", TEXT), ("calls", "calls", None), ("answered", "answered", None),
        ("open_requests", "open", None), ("orphan_responses", "orphans", None),
        ("duplicate_ids", "dup ids", None), ("min_ms", "min ms", None), ("p50_ms", "p50 ms", None),
        ("p75_ms", "p75 ms", None), ("p95_ms", "p95 ms", None), ("p99_ms", "p99 ms", None),
        ("max_ms", "max ms", None)])],
    "confirms": [("confirms", [
        ("connection", "connection", TEXT), ("publisher_id", "publisher", None),
        ("published", "published", None), ("confirmed", "confirmed", None),
        ("errored", "errored", None), ("unconfirmed", "unconfirmed", None),
        ("unmatched_confirms", "unmatched", None), ("errors_by_code", "errors", TEXT),
        ("p50_ms", "p50 ms", None), ("p95_ms", "p95 ms", None), ("p99_ms", "p99 ms", None),
        ("max_ms", "max ms", None)])],
    "credit": [("credit", [
        ("connection", "connection", TEXT), ("subscription_id", "subscription", None),
        ("stream", "stream", TEXT), ("initial_credit", "initial", None),
        ("credits_granted", "granted", None), ("chunks_delivered", "chunks", None),
        ("credit_errors", "errors", None), ("final_credit", "final", None),
        ("stall_count", "stalls", None), ("stalled_ms_total", "stalled", MS)]),
        ("stalls", [
        ("connection", "connection", TEXT), ("subscription_id", "subscription", None),
        ("start_ns", "stall from", TIME), ("end_ns", "to", TIME), ("duration_ms", "lasting", MS),
        ("ended_by", "ended by", TEXT), ("broker_had_more", "broker had more", None)])],
    "errors": [("errors", [
        ("command", "command", TEXT), ("code", "code", None), ("code_name", "name", TEXT),
        ("count", "count", None)])],
    "rocketmq-errors": [("rocketmq_errors", [
        ("request_name", "request", TEXT), ("code", "code", None), ("code_name", "name", TEXT),
        ("topic", "topic", TEXT), ("count", "count", None), ("remark", "remark", TEXT)])],
    "rocketmq-traffic": [("rocketmq_pulls", [
        ("connection", "connection", TEXT), ("request_ts_ns", "asked", TIME),
        ("consumer_group", "group", TEXT), ("topic", "topic", TEXT), ("queue_id", "queue", None),
        ("queue_offset", "offset", None), ("long_poll", "long poll", None),
        ("latency_ms", "answered in", MS), ("code_name", "code", TEXT), ("remark", "remark", TEXT),
        ("messages", "messages", None), ("max_offset", "max offset", None)])],
    "rocketmq-offsets": [("rocketmq_offsets", [
        ("server", "broker", TEXT), ("consumer_group", "group", TEXT), ("topic", "topic", TEXT),
        ("queue_id", "queue", None), ("committed_offset", "committed", None),
        ("commits", "commits", None), ("queried_offset", "queried", None),
        ("max_offset", "max offset", None), ("lag", "lag", None)])],
    ANOMALIES: [("anomalies", [
        ("ts_ns", "time", TIME), ("connection", "connection", TEXT),
        ("direction", "direction", TEXT), ("kind", "kind", TEXT),
        ("stream_offset", "stream offset", None), ("length", "length", None),
        ("detail", "detail", TEXT)])],
}  # fmt: skip
# rows of these tables carry their times in ns as data- attributes (a tool, or a test, reads
# the report's stalls without parsing wall-clock text)
NS_ATTRIBUTES = {"stalls": ("start_ns", "end_ns")}


def render(data: Any, tz: Any = None, title: str | None = None,
           progress: Callable[[int, int, str], None] | None = None) -> str:  # fmt: skip
    """The report of `data` (report.data.ReportData) as one HTML document. `progress(done,
    total, what)` is told before each section is drawn."""
    parts = [_head(title or f"streamdissect report: {data.source}"), _header(data, tz, title),
             _summary(data, tz)]  # fmt: skip
    sections = _shown(data)
    total = len(sections)
    for i, section in enumerate(sections):
        if progress:
            progress(i, total, section.title)
        figure = section.figure(data, tz=tz)
        image = _png(figure)
        del figure
        release_free_memory()  # (a figure's tables, read a chunk at a time, are let go)
        img = f'<img alt="{escape(section.title)}" src="data:image/png;base64,{image}">'
        body = [f'<p class="about">{escape(section.about)}</p>', f"<figure>{img}</figure>"]
        body += [_table(data, name, columns, tz) for name, columns in TABLES_OF.get(section.anchor, [])]
        parts.append(_section(section.anchor, section.title, body))
    if progress:
        progress(total, total, "done")
    parts.append(_anomaly_section(data, tz))
    parts.append(f"</main><footer>made by streamdissect {escape(_version())} on "
                 f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC</footer></body></html>\n")
    return "\n".join(parts)


def _shown(data: Any) -> tuple:
    """The sections shown for these tables: another protocol's where the capture has its
    traffic, and the Stream's unless the capture has another protocol's traffic alone (a
    capture of neither gets the Stream's, each saying it has nothing)."""
    others = tuple(s for s in OTHER_SECTIONS if s.shown is None or s.shown(data))
    if others and not len(data.table("connections")):
        return others
    return SECTIONS + others


def write(data: Any, path: str, **options) -> int:
    """render() into `path`; the bytes written."""
    document = render(data, **options).encode("utf-8")
    with open(path, "wb") as out:
        out.write(document)
    return len(document)


def _png(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _head(title: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>")  # fmt: skip


def _header(data: Any, tz: Any, title: str | None) -> str:
    connections = [c for p in registry.PROTOCOLS if p.connections_table is not None
                   for c in data.table(p.connections_table)["connection"]]  # fmt: skip
    span = "no capture times"
    if data.first_ns is not None and data.last_ns is not None:
        span = (f"{wall(data.first_ns, tz)} to {wall(data.last_ns, tz)} "
                f"({duration((data.last_ns - data.first_ns) / 1e6)})")
    links = " ".join(f'<a href="#{s.anchor}">{escape(s.title)}</a>' for s in _shown(data))
    frames = escape(" · ".join(plural(n, f"{title} frame") for title, n in data.frames_by_protocol))
    return (f"<header><h1>{escape(title or 'streamdissect report')}</h1>"
            f'<p class="meta">{escape(data.source)} · {escape(span)} · '
            f"{plural(len(connections), 'connection')} · {frames}</p>"
            f'<nav><a href="#summary">What needs a look</a> {links} '
            f'<a href="#{ANOMALIES}">Anomalies</a></nav></header><main>')  # fmt: skip


def _summary(data: Any, tz: Any) -> str:
    items = []
    for f in findings(data, tz):
        items.append(f'<li class="{f.level}"><span class="level">{f.level}</span>'
                     f'<a href="#{f.anchor}"><strong>{escape(f.topic)}</strong></a>: '
                     f"{escape(f.text)}</li>")  # fmt: skip
    return _section("summary", "What needs a look", [f'<ul class="findings">{"".join(items)}</ul>'])


def _anomaly_section(data: Any, tz: Any) -> str:
    anomalies = data.table("anomalies")
    body = [ANOMALY_ABOUT]
    if len(anomalies):
        counts = anomalies["kind"].value_counts()
        body.append("<table><tr><th class=text>kind</th><th>count</th></tr>" + "".join(
            f"<tr><td class=text>{escape(str(kind))}</td><td>{n:,}</td></tr>"
            for kind, n in counts.items()) + "</table>")  # fmt: skip
    body += [_table(data, name, columns, tz) for name, columns in TABLES_OF[ANOMALIES]]
    return _section(ANOMALIES, "Anomalies", body)


def _section(anchor: str, title: str, body: Sequence[str]) -> str:
    return f'<section id="{anchor}"><h2>{escape(title)}</h2>{"".join(body)}</section>'


def _table(data: Any, name: str, columns: list, tz: Any) -> str:
    if not data.has(name):
        return f'<p class="more">No {escape(name)} table in this dataset.</p>'
    count = data.count(name)
    if not count:
        return f'<p class="more">The {escape(name)} table is empty.</p>'
    head = "".join(f"<th{' class=text' if how == TEXT else ''}>{escape(label)}</th>"
                   for _, label, how in columns)  # fmt: skip
    rows = []
    ns_columns = NS_ATTRIBUTES.get(name, ())
    for _, row in data.head(name, MAX_TABLE_ROWS).iterrows():
        attributes = "".join(f' data-{c.replace("_", "-")}="{_ns(row[c])}"' for c in ns_columns)
        cells = "".join(_cell(row[column], how, tz) for column, _, how in columns)
        rows.append(f"<tr{attributes}>{cells}</tr>")
    more = ""
    if count > MAX_TABLE_ROWS:
        more = f'<p class="more">The first {MAX_TABLE_ROWS} of {count:,} rows.</p>'
    return (f'<div class="scroll"><table class="{escape(name)}"><tr>{head}</tr>{"".join(rows)}'
            f"</table></div>{more}")


def _ns(value: Any) -> str:
    return "" if missing(value) else str(int(value))


def _cell(value: Any, how: str | None, tz: Any) -> str:
    if how == TIME:
        return f"<td>{escape(wall(value, tz))}</td>"
    if how == MS:
        return f"<td>{escape(duration(value))}</td>"
    if how == TEXT:
        return f"<td class=text>{escape(cell(value))}</td>"
    return f"<td>{escape(cell(value))}</td>"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("streamdissect")
    except PackageNotFoundError:
        return "(source tree)"

"""What the report tests share: crafted captures (no Stream traffic; damaged frames only), the
client-side truth of the corpus, and a reader of the HTML report's structure."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import struct
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
import worsen

CAPTURES = worsen.CAPTURES
SLOW = CAPTURES / "rstream-slow-consumer-3.10.pcap"
ROOT = CAPTURES.parent
CLI = [sys.executable, "-m", "streamdissect"]
SECTIONS = ("summary", "connections", "latency", "confirms", "backlog", "credit", "consumers",
            "throughput", "errors", "anomalies")  # fmt: skip
PORTS = (5552, 5553)  # (the 3.10 and the 4.0 broker of the corpus)
T0 = 1_700_000_000 * 10**9


def truth_of(capture: Path) -> dict:
    return json.loads(capture.with_name(capture.name.replace(".pcap", ".truth.json")).read_text())


def sleeps(capture: Path) -> list[tuple[int, int]]:
    """The slow consumer's recorded sleeps (client clock, ns)."""
    truth = truth_of(capture)
    (sleeper,) = [c for c in truth["connections"] if "sleeps_ns" in c]
    return [tuple(s) for s in sleeper["sleeps_ns"]]


def _connection(sport: int, dport: int, payloads: list[bytes]) -> list:
    packets = [(T0, worsen.eth_tcp(sport, dport, 999, 0, 0x02, b""), 54)]
    seq = 1000
    for i, payload in enumerate(payloads):
        data = worsen.eth_tcp(sport, dport, seq, 5000, 0x18, payload)
        packets.append((T0 + (i + 1) * 1_000_000, data, len(data)))
        seq += len(payload)
    return packets


def other_traffic_capture(path: Path) -> Path:
    """HTTP requests on port 80 and nothing else: no Stream traffic at all."""
    request = b"GET /index.html HTTP/1.1\r\nHost: example\r\n\r\n"
    return worsen.write_pcap(path, 1, _connection(40000, 80, [request] * 4))


def damaged_capture(path: Path) -> Path:
    """A connection to 5552 whose only frames cannot be read: a PeerProperties whose map
    claims -1 entries, then bytes that are no frame at all."""
    broken = struct.pack(">IHHIi", 12, 0x0011, 1, 1, -1)
    return worsen.write_pcap(path, 1, _connection(40001, 5552, [broken, b"\xff" * 64]))


class ReportPage(HTMLParser):
    """The report's structure: section ids, images, links, every attribute, and the rows of
    each table (by its class) as lists of cell texts, with the rows' data- attributes."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.images: list[str] = []
        self.links: list[str] = []
        self.tags: set[str] = set()
        self.attributes: list[tuple[str, str]] = []
        self.tables: dict[str, list[tuple[dict, list[str]]]] = {}
        self._table: str | None = None
        self._row: tuple[dict, list[str]] | None = None
        self._cell: list[str] | None = None
        self.text_parts: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.add(tag)
        self.attributes += [(k, v or "") for k, v in attrs.items()]
        if "id" in attrs:
            self.ids.append(attrs["id"])
        if tag == "img":
            self.images.append(attrs.get("src", ""))
        if tag == "a":
            self.links.append(attrs.get("href", ""))
        if tag == "table":
            self._table = attrs.get("class", "")
            self.tables.setdefault(self._table, [])
        if tag == "tr" and self._table is not None:
            self._row = ({k: v for k, v in attrs.items() if k.startswith("data-")}, [])
        if tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row[1].append("".join(self._cell).strip())
            self._cell = None
        if tag == "tr" and self._row is not None and self._table is not None:
            self.tables[self._table].append(self._row)
            self._row = None
        if tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        self.text_parts.append(data)

    @property
    def text(self) -> str:
        return " ".join(self.text_parts)

    def rows(self, table: str) -> list[dict]:
        """A table's body rows as {heading: cell text} (plus its data- attributes)."""
        (head, *body) = self.tables[table]
        return [{**dict(zip(head[1], cells)), **attrs} for attrs, cells in body]


def make_report(directory: Path, *args: str) -> tuple[ReportPage, subprocess.CompletedProcess]:
    """`streamdissect report ARGS -o DIRECTORY/report.html` in a process of its own, which
    succeeds without a traceback: the page, and the run."""
    out = directory / "report.html"
    run = subprocess.run([*CLI, "report", *args, "-o", str(out)], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    return ReportPage(out.read_text(encoding="utf-8")), run


@contextlib.contextmanager
def figures_kept() -> Iterator[dict]:
    """Within, the report keeps the figure each of its sections draws: {anchor: Figure}."""
    from streamdissect import report
    from streamdissect.report import html

    drawn: dict = {}

    def keeping(section):
        def figure(data, **options):
            drawn[section.anchor] = section.figure(data, **options)
            return drawn[section.anchor]

        return dataclasses.replace(section, figure=figure)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(html, "SECTIONS", tuple(keeping(s) for s in report.SECTIONS))
        yield drawn

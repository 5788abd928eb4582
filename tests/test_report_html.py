"""`streamdissect report ... -o FILE`: one self-contained HTML file (every figure an embedded
PNG, styles inline, nothing fetched) whose every section is there for every capture of the
corpus, whose tables say what the client-side truth says, which opens with what needs a
look, and which still renders, and says so, for a capture with no Stream traffic or only
damaged frames."""

from __future__ import annotations

import base64
import subprocess
from collections import Counter

import pytest
import worsen
from reportlib import (
    CLI,
    ROOT,
    SECTIONS,
    SLOW,
    ReportPage,
    damaged_capture,
    make_report,
    other_traffic_capture,
    sleeps,
    truth_of,
)

CORPUS = worsen.corpus_captures()


def assert_self_contained(page: ReportPage) -> None:
    """Nothing to fetch: no script, stylesheet link or frame; every image a data: PNG;
    links only to the page's own sections."""
    assert not page.tags & {"script", "link", "iframe", "object", "embed"}
    for name, value in page.attributes:
        assert "http://" not in value and "https://" not in value, (name, value[:80])
    for src in page.images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(b"\x89PNG\r\n\x1a\n")
    for href in page.links:
        assert href.startswith("#") and href[1:] in page.ids, href


@pytest.mark.parametrize("capture", CORPUS, ids=lambda p: p.stem)
def test_every_section_for_every_capture(capture, corpus_report):
    page, said, _ = corpus_report(capture)
    assert "Traceback" not in said
    truth = truth_of(capture)
    assert_self_contained(page)
    for anchor in SECTIONS:
        assert anchor in page.ids, anchor
    assert len(page.images) == len(SECTIONS) - 2  # (a figure a section; not summary, anomalies)
    # the tables say what the client saw
    assert len(page.rows("connections")) == len(truth["connections"])
    codes = Counter()
    for connection in truth["connections"]:
        codes.update({int(code, 16): n for code, n in connection.get("codes", {}).items()
                      if int(code, 16) != 1})  # fmt: skip
    found = Counter()
    for row in page.rows("errors") if "errors" in page.tables else []:
        found[int(row["code"])] += int(row["count"].replace(",", ""))
    assert found == codes
    confirms = page.rows("confirms") if "confirms" in page.tables else []
    for column, key in (("published", "publishing_ids"), ("confirmed", "confirmed")):
        assert sum(int(r[column].replace(",", "")) for r in confirms) == sum(
            c.get(key, 0) for c in truth["connections"]), column
    # the summary names what needs a look, pointing at its section
    summary = page.text[page.text.rindex("What needs a look"):]
    if codes:
        assert "Error codes" in summary
    if any(c.get("errored") for c in truth["connections"]):
        assert "Errored publishes" in summary


def test_the_slow_consumers_stalls_are_its_sleeps(slow_report):
    page = ReportPage(slow_report.read_text(encoding="utf-8"))
    stalls = page.rows("stalls")
    recorded = sleeps(SLOW)
    ended_by_credit = [s for s in stalls if s["ended by"] == "credit"]
    assert len(ended_by_credit) == len(recorded) > 10
    for row, (start, end) in zip(ended_by_credit, recorded):
        # credit ran out before the client went to sleep; the Credit left after it woke
        assert int(row["data-start-ns"]) <= start and end <= int(row["data-end-ns"])
        assert int(row["data-end-ns"]) - int(row["data-start-ns"]) < end - start + 100_000_000
    assert f"{len(stalls)} credit stalls" in page.text
    assert "#credit" in page.links


@pytest.mark.parametrize(("make", "said"), [
    (other_traffic_capture, ["No Stream traffic", "No RabbitMQ Stream traffic"]),
    (damaged_capture, ["No readable Stream traffic", "malformed"]),
], ids=["other-traffic", "damaged-frames-only"])  # fmt: skip
def test_a_capture_without_readable_stream_traffic_renders_and_says_so(tmp_path, make, said):
    page, _ = make_report(tmp_path, str(make(tmp_path / "capture.pcap")))
    assert_self_contained(page)
    assert all(anchor in page.ids for anchor in SECTIONS)
    assert len(page.images) == len(SECTIONS) - 2
    summary = page.text[page.text.rindex("What needs a look"):page.text.index("One bar per")]
    for words in said:
        assert words in summary
    if make is damaged_capture:
        assert [r["kind"] for r in page.rows("anomalies")][:1] == ["malformed"]


def test_three_frames(tmp_path):
    page, _ = make_report(tmp_path, "-c", "3", str(SLOW))
    assert all(anchor in page.ids for anchor in SECTIONS)
    (row,) = page.rows("connections")
    assert int(row["frames →"]) + int(row["frames ←"]) == 3


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_directory_of_tables_gives_the_same_report(tmp_path, fmt, slow_report):
    tables = tmp_path / "tables"
    subprocess.run([*CLI, "analyze", "--format", fmt, "-o", str(tables), str(SLOW)], cwd=ROOT,
                   check=True, capture_output=True)  # fmt: skip
    from_dir, _ = make_report(tmp_path, "--parquet", str(tables))
    from_capture = ReportPage(slow_report.read_text(encoding="utf-8"))
    assert_self_contained(from_dir)
    for table in ("stalls", "connections", "errors", "latency", "confirms", "credit"):
        if table in from_capture.tables:
            assert from_dir.rows(table) == from_capture.rows(table), table


def test_progress_on_stderr_for_long_captures(tmp_path, monkeypatch, capsys):
    from streamdissect.cli import main
    from streamdissect.cli import report as report_cli

    out = tmp_path / "r.html"
    assert main(["report", str(SLOW), "-o", str(out)]) == 0
    assert capsys.readouterr().err == ""  # (a small capture: no progress)
    monkeypatch.setattr(report_cli, "PROGRESS_MIN_BYTES", 0)
    assert main(["report", str(SLOW), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "reading" in err and "drawing Credit and stalls (5/8)" in err
    assert main(["report", "-q", str(SLOW), "-o", str(out)]) == 0
    assert capsys.readouterr().err == ""


def test_usage_errors(tmp_path):
    for args in (["--parquet", str(tmp_path), str(SLOW)], ["--parquet", str(tmp_path)], []):
        run = subprocess.run([*CLI, "report", *args, "-o", str(tmp_path / "x.html")], cwd=ROOT,
                             capture_output=True, text=True, check=False)  # fmt: skip
        assert run.returncode == 2 and "error" in run.stderr and "Traceback" not in run.stderr
    run = subprocess.run([*CLI, "report", str(SLOW), "-o", str(tmp_path / "no" / "x.html")],
                         cwd=ROOT, capture_output=True, text=True, check=False)  # fmt: skip
    assert run.returncode == 2 and "Traceback" not in run.stderr

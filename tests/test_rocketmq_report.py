"""`streamdissect report` on RocketMQ captures: its RocketMQ sections (shown only when the
capture has RocketMQ calls), their tables and what needs a look, from a capture and from the
tables `analyze --format parquet` wrote. Expected values come from the captures' truth
files; a Stream capture's report keeps its sections (test_report_html)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import worsen
from reportlib import ReportPage, make_report
from rocketmq_support import CAPTURES, truth

from streamdissect import report

ROCKETMQ_SECTIONS = ("rocketmq-latency", "rocketmq-errors", "rocketmq-traffic",
                     "rocketmq-offsets")  # fmt: skip


def _errors_truth() -> list[dict]:
    """The responses other than SUCCESS the errors capture's clients got."""
    return [f for c in truth("rmq-errors")["clients"] for f in c["report"].get("frames", ())
            if f["dir"] == "s->c response" and f["code"]]  # fmt: skip


@pytest.fixture(scope="module")
def errors_page(tmp_path_factory) -> ReportPage:
    page, _ = make_report(tmp_path_factory.mktemp("errors"), str(CAPTURES / "rmq-errors.pcap"))
    return page


def test_a_rocketmq_capture_gets_the_rocketmq_sections(errors_page):
    assert all(anchor in errors_page.ids for anchor in ROCKETMQ_SECTIONS)
    assert all(f"#{anchor}" in errors_page.links for anchor in ROCKETMQ_SECTIONS)


def test_a_rocketmq_capture_is_not_given_the_stream_sections(errors_page):
    stream = [s.anchor for s in report.SECTIONS]
    assert not [anchor for anchor in stream if anchor in errors_page.ids]
    assert not [anchor for anchor in stream if f"#{anchor}" in errors_page.links]
    assert "anomalies" in errors_page.ids


def test_a_capture_of_both_protocols_gets_both_protocols_sections(tmp_path):
    link, stream_packets = worsen.read_pcap(worsen.CAPTURES / "rstream-publish-confirm-3.10.pcap")
    _, rmq = worsen.read_pcap(CAPTURES / "rmq-errors.pcap")
    mixed = worsen.write_pcap(tmp_path / "mixed.pcap", link,
                              sorted(stream_packets + rmq, key=lambda p: p[0]))  # fmt: skip
    page, _ = make_report(tmp_path, str(mixed))
    anchors = [s.anchor for s in report.SECTIONS] + list(ROCKETMQ_SECTIONS)
    assert all(anchor in page.ids for anchor in anchors)


def test_the_errors_table_is_what_the_clients_got(errors_page):
    rows = errors_page.rows("rocketmq_errors")
    got = sorted((int(r["code"]), r["remark"]) for r in rows)
    expected = sorted((f["code"], " ".join(f["remark"].split())) for f in _errors_truth())
    assert [(code, " ".join(remark.split())) for code, remark in got] == expected


def test_what_needs_a_look_names_the_errors_and_the_unanswered_request(errors_page):
    text = errors_page.text
    assert "RocketMQ error codes" in text and "RocketMQ requests never answered" in text
    assert f"{len(_errors_truth())} responses other than SUCCESS" in text
    assert "No Stream traffic" not in text


def test_a_stream_capture_gets_no_rocketmq_section(tmp_path):
    page, _ = make_report(tmp_path, str(worsen.CAPTURES / "rstream-publish-confirm-3.10.pcap"))
    assert not [i for i in page.ids if i.startswith("rocketmq")]


def test_the_pulls_and_offsets_of_a_long_poll(tmp_path):
    page, _ = make_report(tmp_path, str(CAPTURES / "rmq-long-poll.pcap"))
    consumer = next(c["report"] for c in truth("rmq-long-poll")["clients"]
                    if c["report"]["role"] == "consumer")  # fmt: skip
    pulls = page.rows("rocketmq_pulls")
    asked = [f for f in consumer["frames"] if f["dir"] == "c->s request" and f["code"] == 11]
    assert [int(r["offset"]) for r in pulls] == [f["header"]["queueOffset"] for f in asked]
    assert pulls[0]["remark"] == "FOUND" and pulls[0]["messages"] == "1"
    (offsets,) = page.rows("rocketmq_offsets")
    commit = next(f for f in consumer["frames"] if f["code"] == 15)
    assert offsets["group"] == consumer["group"]
    assert int(offsets["committed"]) == commit["header"]["commitOffset"]
    assert offsets["lag"] == "0"


def test_a_report_from_the_exported_tables_has_the_rocketmq_sections(tmp_path):
    out = tmp_path / "tables"
    run = subprocess.run([sys.executable, "-m", "streamdissect", "analyze", "--format",
                          "parquet", "-o", str(out), str(CAPTURES / "rmq-errors.pcap")],
                         capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr
    page, _ = make_report(tmp_path, "--parquet", str(out))
    assert all(anchor in page.ids for anchor in ROCKETMQ_SECTIONS)
    assert len(page.rows("rocketmq_errors")) == len(_errors_truth())


def test_each_rocketmq_figure_draws_its_tables():
    for name in ("rmq-java-rocketmq-batch", "rmq-broker-register"):
        data = report.load(str(CAPTURES / f"{name}.pcap"))
        drawn = {s.anchor: s.figure(data) for s in report.OTHER_SECTIONS if s.shown(data)}
        assert set(drawn) == set(ROCKETMQ_SECTIONS)
        assert all(fig.get_suptitle() for fig in drawn.values())
        sends = drawn["rocketmq-traffic"].axes[0]
        # the batch's 4 messages and the 2 single sends, one point each
        points = sum(len(line.get_xdata()) for line in sends.get_lines())
        sent = sum(s["messages"] for c in truth(name)["clients"]
                   for s in c["report"].get("sends", ()))  # fmt: skip
        assert points == sent

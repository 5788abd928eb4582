"""A live capture tool's own counts (capture.live): read from what tcpdump and dumpcap write
on stderr, and their drops made an anomaly of the report, never hidden (issue 28). The
texts are these tools' own output, as Debian's tcpdump 4.99 and dumpcap 4.0 write it."""

from __future__ import annotations

import worsen

from streamdissect.analysis import analyze
from streamdissect.capture.live import CaptureStatistics, parse_statistics
from streamdissect.cli.analyze import told_drops

TCPDUMP = (b"tcpdump: listening on lo, link-type EN10MB (Ethernet), snapshot length 262144 bytes\n"
           b"tcpdump: 1200 packets captured, 1337 packets received by filter, 0 packets dropped by kernel\n"
           b"4310 packets captured\n4402 packets received by filter\n87 packets dropped by kernel\n"
           b"5 packets dropped by interface\n")  # fmt: skip
DUMPCAP = (b"Capturing on 'Loopback: lo'\nFile: /dev/null\nPackets captured: 880\n"
           b"Packets received/dropped on interface 'Loopback: lo': 900/20 "
           b"(pcap:20/dumpcap:0/flushed:0/ps_ifdrop:0) (97.8%)\n")  # fmt: skip


def test_the_last_counts_each_tool_wrote():
    assert parse_statistics("tcpdump", TCPDUMP) == CaptureStatistics("tcpdump", 4402, 92)
    assert parse_statistics("tcpdump", TCPDUMP[:200]) == CaptureStatistics("tcpdump", 1337, 0)
    assert parse_statistics("dumpcap", DUMPCAP) == CaptureStatistics("dumpcap", 900, 20)
    assert parse_statistics("tcpdump", b"tcpdump: listening on lo\n") is None
    assert parse_statistics("dumpcap", b"garbage \xff\x00") is None


class Live:
    def __init__(self, said: bytes) -> None:
        self.said = said

    def statistics(self, ask: bool = True):
        return parse_statistics("tcpdump", self.said)


def test_drops_are_an_anomaly_of_the_report(capsys):
    result = analyze(str(worsen.real_capture()), report_only=True)
    before = len(result.anomalies)
    told_drops(result, Live(TCPDUMP))
    rows = result.rows("anomalies")
    assert len(rows) == before + 1
    assert "capture_dropped" in str(rows[-1]) and "92 dropped" in str(rows[-1])
    assert "tcpdump: 4,402 packets received, 92 dropped" in capsys.readouterr().err
    clean = analyze(str(worsen.real_capture()), report_only=True)
    told_drops(clean, Live(TCPDUMP[:200]))  # (no drop: said on stderr, no anomaly)
    assert len(clean.rows("anomalies")) == before

"""capture.pcap_clock: the newest packet time of a pcap stream fed in pieces (a live capture
stops once a packet captured after the stop went by), held to the capture reader's packets."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from streamdissect.capture import open_capture
from streamdissect.capture.pcap_clock import PcapClock

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
RECORD_HEADER = 16


@pytest.mark.parametrize("name", ["rstream-publish-confirm-3.10.pcap", "raw-errors-4.0.pcap",
                                  "rbfly-publish-consume-3.10.pcap"])  # fmt: skip
def test_the_newest_header_gone_by_in_any_pieces(name):
    path = CAPTURES / name
    data = path.read_bytes()
    # (offset just past each record's header, its time): from the capture reader
    headers = [(offset + RECORD_HEADER, ts_ns) for ts_ns, _, _, _, offset in open_capture(str(path))]
    rng = random.Random(name)
    for _ in range(20):
        clock, at = PcapClock(), 0
        while at < len(data):
            piece = rng.choice([1, 7, 16, 23, 100, 1500, 65536])
            clock.feed(data[at : at + piece])
            at = min(at + piece, len(data))
            gone = [ts for end, ts in headers if end <= at]
            assert clock.newest_ns == (gone[-1] if gone else None), at
        assert not clock.lost and clock.newest_ns == headers[-1][1]


def test_not_pcap_is_lost_not_guessed():
    clock = PcapClock()
    clock.feed(b"\x0a\x0d\x0d\x0a" + bytes(60))  # (pcapng: dumpcap's output)
    assert clock.lost and clock.newest_ns is None
    lying = (CAPTURES / "raw-errors-4.0.pcap").read_bytes()[:24] + bytes(8) + b"\xff" * 8
    clock = PcapClock()
    clock.feed(lying)  # (a record longer than any packet: no next header to trust)
    assert clock.lost and clock.newest_ns is None

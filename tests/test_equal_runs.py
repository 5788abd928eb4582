"""Runs of equal frames (protocols.stream.hot_walk.EqualRuns) give the report the streaming
engine's records give, byte for byte, when they are asked for as early as the walk allows.

The walk asks EqualRuns only after FOLLOW_AFTER frames of one size and key (16: cheaper on
the benchmark captures), which the corpus' short runs seldom reach; here it asks at the
second frame of a kind, on the corpus and the made-worse copies, with blocks small enough
that the runs straddle segments and blocks."""

from __future__ import annotations

import pytest
import worsen
from test_bulk_engine import WORSE
from test_columns_report import report

from streamdissect.capture import blocks
from streamdissect.protocols.stream import hot_walk


@pytest.fixture
def asked_early(monkeypatch):
    """EqualRuns asked at the second frame of a kind; the frames it noted, counted."""
    noted = []
    follow = hot_walk.EqualRuns.follow

    def counted(self, p, size, key, send):
        before = len(self.starts)
        end = follow(self, p, size, key, send)
        noted.append(len(self.starts) - before)
        return end

    monkeypatch.setattr(hot_walk, "FOLLOW_AFTER", 2)
    monkeypatch.setattr(hot_walk.EqualRuns, "follow", counted)
    return noted


def assert_same_asked_early(path) -> None:
    reference = report(path, "stream", "records")
    for block in (blocks.BLOCK, 9_000):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(blocks, "BLOCK", block)
            assert report(path, "bulk", "columns") == reference, block


def test_corpus_report_same_asked_early(asked_early):
    for path in worsen.corpus_captures():
        assert_same_asked_early(path)
    # (the corpus has runs: hundreds of frames are taken this way)
    assert sum(asked_early) > 100, asked_early


@pytest.mark.parametrize("name", sorted(WORSE))
def test_worsened_report_same_asked_early(asked_early, tmp_path, name):
    linktype, packets = worsen.read_pcap(worsen.real_capture())
    path = worsen.write_pcap(tmp_path / "w.pcap", linktype, WORSE[name](packets))
    assert_same_asked_early(path)  # (some copies go the record way: no run to take)

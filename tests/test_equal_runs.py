"""Runs of equal frames and of frames each filling a segment (protocols.stream.hot_walk:
EqualRuns, SegmentRuns) give the report the streaming engine's records give, byte for byte,
when they are asked for as early as the walk allows. (Both are the Python walk's: in the
compiled walk's mode, native_modes, the same reports come from a walk that never asks them.)

The walk asks them only after FOLLOW_AFTER frames of one size and key, or each filling its
segment (16: cheaper on the benchmark captures), which the corpus' short runs seldom reach;
here it asks at the second such frame, on the corpus and the made-worse copies, with blocks
small enough that the runs straddle segments and blocks."""

from __future__ import annotations

import pytest
import worsen
from test_bulk_engine import WORSE
from test_columns_report import report

from streamdissect.capture import blocks
from streamdissect.protocols.stream import hot_walk

# every test both ways: the compiled walk and the Python one (native_modes)
pytestmark = pytest.mark.usefixtures("walk_mode")

# EqualRuns asked early, SegmentRuns never; the other way round; both early
EARLY = {"equal": (2, 1 << 40), "filling": (1 << 40, 2), "both": (2, 2)}


@pytest.fixture(params=sorted(EARLY))
def asked_early(request, monkeypatch):
    """EqualRuns and SegmentRuns asked at the second frame or never (EARLY); the frames each
    noted, counted by class name."""
    noted = {"EqualRuns": [], "SegmentRuns": []}

    def counting(cls):
        follow = cls.follow

        def counted(self, *args):
            before = len(self.starts)
            end = follow(self, *args)
            noted[cls.__name__].append(len(self.starts) - before)
            return end

        monkeypatch.setattr(cls, "follow", counted)

    follow_after, fill_after = EARLY[request.param]
    monkeypatch.setattr(hot_walk, "FOLLOW_AFTER", follow_after)
    monkeypatch.setattr(hot_walk, "FILL_AFTER", fill_after)
    counting(hot_walk.EqualRuns)
    counting(hot_walk.SegmentRuns)
    return noted


def assert_same_asked_early(path) -> None:
    reference = report(path, "stream", "records")
    for block in (blocks.BLOCK, 9_000):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(blocks, "BLOCK", block)
            assert report(path, "bulk", "columns") == reference, block


def test_corpus_report_same_asked_early(asked_early, walk_mode):
    for path in worsen.corpus_captures():
        assert_same_asked_early(path)
    taken = {name: sum(counts) for name, counts in asked_early.items()}
    if walk_mode == "native":  # (the compiled walk takes every run a frame at a time)
        assert taken == {"EqualRuns": 0, "SegmentRuns": 0}, taken
        return
    # (the corpus has runs of both kinds: hundreds of frames are taken each way)
    assert taken["EqualRuns"] > 100 or taken["SegmentRuns"] > 100, taken
    if hot_walk.FILL_AFTER > 2:
        assert taken["EqualRuns"] > 100, taken
    if hot_walk.FOLLOW_AFTER > 2:
        assert taken["SegmentRuns"] > 100, taken


@pytest.mark.parametrize("name", sorted(WORSE))
def test_worsened_report_same_asked_early(asked_early, tmp_path, name):
    linktype, packets = worsen.read_pcap(worsen.real_capture())
    path = worsen.write_pcap(tmp_path / "w.pcap", linktype, WORSE[name](packets))
    assert_same_asked_early(path)  # (some copies go the record way: no run to take)

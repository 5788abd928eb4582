"""Frames larger than a TCP segment, from a capture recorded here against the real broker:
Publish frames reassembled whole, big Deliver frames counted without being kept."""

from __future__ import annotations

from pathlib import Path

from conftest import MESSAGE_SIZE, MESSAGES

from streamdissect.engine.dissect import Dissector, FrameEvent


def run(path: Path, **options) -> list:
    events = list(Dissector(**options).run(str(path)))
    assert not [e for e in events if not isinstance(e, FrameEvent) and e.kind == "gap"]
    return [e for e in events if isinstance(e, FrameEvent)]


def test_publish_spanning_segments_is_whole(big_capture):
    frames = run(big_capture)
    # ours only: other clients may use the broker while we record
    publishes = [
        e.record for e in frames if e.record.command == "Publish" and e.record.size > MESSAGE_SIZE
    ]
    assert sum(r.record_count for r in publishes) == MESSAGES
    assert max(r.size for r in publishes) > 65536  # more than one loopback segment
    assert all(not r.truncated for r in publishes)


def test_big_deliver_is_counted_not_kept(big_capture):
    delivers = [e.record for e in run(big_capture) if e.record.command == "Deliver"]
    assert sum(r.record_count for r in delivers) >= MESSAGES
    big = [r for r in delivers if r.size > 64 * 1024]
    assert big and all(not r.truncated and r.chunk_payload is None for r in big)
    kept = [
        e.record for e in run(big_capture, deliver_keep_limit=None) if e.record.command == "Deliver"
    ]
    assert [r.record_count for r in kept] == [r.record_count for r in delivers]
    assert all(r.crc_ok for r in kept)


def test_limit_check_reads_the_big_frames_noted_as_arrays():
    """LimitCheck.wrong (did a Tune lower the frame limit under a frame already walked as
    within it?) answers the same for big frames noted as arrays (big_runs: the hot walk's) as
    for the same frames noted one by one (big)."""
    from types import SimpleNamespace

    import numpy as np

    from streamdissect.framing.walk import LimitCheck

    framer = SimpleNamespace(frame_limit=1000, max_frame=1000)
    rows, offsets, sizes = np.array([3, 5, 9]), np.array([100, 200, 300]), np.array([900, 600, 700])
    cases = [  # (row, offset, side, new limit) of each Tune -> wrong
        ([(4, 0, 0, 650)], True),  # (the frame of row 9, 700 bytes, is over it)
        ([(6, 0, 0, 800)], False),
        ([(2, 0, 0, 650)], True),  # (rows 3 and 9)
        ([(10, 0, 0, 650)], False),  # (after every big frame)
    ]
    for changes, expected in cases:
        one, many = LimitCheck(framer), LimitCheck(framer)
        one.big.extend(zip(rows.tolist(), offsets.tolist(), [0] * 3, sizes.tolist()))
        many.big_runs.append((rows, offsets, 0, sizes))
        one.changes, many.changes = list(changes), list(changes)
        assert one.wrong() == many.wrong() == expected

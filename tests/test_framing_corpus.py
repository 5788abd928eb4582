"""Every corpus capture gives exactly the frames its truth file lists (written by the
client side, never by our parser), per connection, direction and key/version."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import worsen

from streamdissect.engine.dissect import Dissector, FrameEvent

TRUTH_FILES = worsen.corpus_truths()


def test_the_corpus_has_truth_files():
    # A missing corpus must fail, not silently skip the test below.
    assert TRUTH_FILES, f"no *.truth.json in {worsen.CAPTURES}"
    captures = [path.name for path in worsen.corpus_captures()]
    assert captures == sorted(json.loads(path.read_text())["capture"] for path in TRUTH_FILES)


@pytest.mark.parametrize("truth_path", TRUTH_FILES, ids=lambda p: p.name)
def test_capture_frames_match_truth(truth_path: Path):
    truth = json.loads(truth_path.read_text())
    capture = truth_path.with_name(truth["capture"])
    dissector = Dissector(ports=[truth.get("broker_port", 5552)])
    counts: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    for event in dissector.run(str(capture)):
        if isinstance(event, FrameEvent):
            key = f"0x{event.record.key:04x} v{event.record.version}"
            counts[event.connection][event.direction][key] += 1
    by_ports = {}
    for conn in dissector.connections:
        ports = (int(conn.client.rsplit(":", 1)[1]), int(conn.server.rsplit(":", 1)[1]))
        by_ports[ports] = ({d: dict(c) for d, c in counts[conn.connection].items() if c}, conn)
    assert len(by_ports) == len(truth["connections"])
    for expected in truth["connections"]:
        got, conn = by_ports[(expected["client_port"], expected["server_port"])]
        assert got == {d: c for d, c in expected["frames"].items() if c}
        if "bytes" in expected:
            assert (conn.bytes_c2s, conn.bytes_s2c) == (
                expected["bytes"]["c2s"],
                expected["bytes"]["s2c"],
            )
        assert (conn.frames_c2s, conn.frames_s2c) == (
            sum(expected["frames"].get("c2s", {}).values()),
            sum(expected["frames"].get("s2c", {}).values()),
        )

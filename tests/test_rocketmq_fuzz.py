"""The RocketMQ fuzz campaign (benchmarks/fuzz_rocketmq.py) in the suite: every input it
saved under tests/regressions/rocketmq/ replayed through its target's checks (the file name
says the target: frame-*, stream-*, pcap-*), and a short campaign of each target run with
no finding."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
REGRESSIONS = Path(__file__).resolve().parent / "regressions" / "rocketmq"
TARGETS = ("frame", "stream", "pcap")


def load():
    if "streamdissect_fuzz_rocketmq" not in sys.modules:
        spec = importlib.util.spec_from_file_location("streamdissect_fuzz_rocketmq",
                                                      BENCHMARKS / "fuzz_rocketmq.py")  # fmt: skip
        module = importlib.util.module_from_spec(spec)
        sys.modules["streamdissect_fuzz_rocketmq"] = module
        spec.loader.exec_module(module)
    return sys.modules["streamdissect_fuzz_rocketmq"]


INPUTS = sorted(p for p in REGRESSIONS.iterdir() if p.name.split("-", 1)[0] in TARGETS)


def test_there_are_regression_inputs():
    assert INPUTS and all(p.parent == REGRESSIONS for p in INPUTS)


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.name)
def test_regression_input_is_handled(path, tmp_path):
    load().replay(path.name.split("-", 1)[0], path.read_bytes(), str(tmp_path / "input.pcap"))


def test_a_short_campaign_finds_nothing(tmp_path, monkeypatch):
    """Each target's mutated inputs through the same checks as the soak's; a finding would
    be saved to tmp_path (not into the tree) and counted."""
    fuzz = load()
    monkeypatch.setattr(fuzz, "REGRESSIONS", tmp_path)
    result = fuzz.campaign(None, {"frame": 3000, "stream": 150, "pcap": 12}, seed=2026)
    assert {name: target["inputs"] >= {"frame": 3000, "stream": 150, "pcap": 12}[name]
            for name, target in result["targets"].items()} == dict.fromkeys(TARGETS, True)  # fmt: skip
    assert result["findings"] == 0, result
    assert not list(tmp_path.iterdir())

"""Every input the fuzz campaign (benchmarks/fuzz.py) found a problem with, replayed through
the same target and checks. The file name says the target: frame-*, stream-*, pcap-*."""

from __future__ import annotations

import pytest
from test_fuzz_harness import REGRESSIONS, load

fuzz = load()
INPUTS = sorted(p for p in REGRESSIONS.iterdir() if p.suffix in fuzz.EXTENSIONS.values())
# Inputs of findings still open: name -> reason (the test is then expected to fail, and
# reports when it passes). The pcap-engines-* inputs are differential findings (bulk engine
# vs the streaming reference), fixed in the bulk engine.
OPEN: dict[str, str] = {}


def test_there_are_regression_inputs():
    assert {p.name.split("-", 1)[0] for p in INPUTS} == {"frame", "stream", "pcap"}


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.name)
def test_regression_input_is_handled(path, tmp_path, request):
    if path.name in OPEN:
        request.node.add_marker(pytest.mark.xfail(reason=OPEN[path.name], strict=True))
    target = path.name.split("-", 1)[0]
    fuzz.replay(target, path.read_bytes(), str(tmp_path / "input.pcap"))


@pytest.mark.parametrize("path", [p for p in INPUTS if p.suffix == ".stream"], ids=lambda p: p.name)
def test_every_two_way_split_of_a_stream_gives_the_same_output(path):
    """The framer must not report other frames because TCP cut the bytes elsewhere."""
    data = path.read_bytes()[:512]

    def run(*pieces: bytes) -> list:
        collect = fuzz._Collect()
        framer = fuzz._framer(collect)
        for piece in pieces:
            framer.data(memoryview(piece), 1)
        framer.finish(1)
        return collect.events

    whole = run(data)
    for cut in range(1, len(data)):
        assert run(data[:cut], data[cut:]) == whole, cut

"""The capture filter a live run (`frames -i`, `analyze -i`, `report -i`) gives its tool: the
ports the user named, every protocol's default ports when none were named, every TCP packet
with the heuristic. (The tool is not started: the filter is taken where the command hands it
to the capture; tests/test_cli_live.py holds a real run's.)"""

from __future__ import annotations

import pytest

from streamdissect.capture import CaptureError
from streamdissect.capture.live import capture_filter
from streamdissect.cli import _live, main

# (options, the filter): written from the options' documented meaning, not by the code
NO_HEURISTIC = [
    ([], "tcp port 5552 or tcp port 9876 or tcp port 10911"),
    (["--port", "5552"], "tcp port 5552"),
    (["--port", "5553", "--port", "5552"], "tcp port 5552 or tcp port 5553"),
    (["--rocketmq-port", "9999"], "tcp port 9876 or tcp port 9999 or tcp port 10911"),
    (["--port", "5552", "--rocketmq-port", "9999"],
     "tcp port 5552 or tcp port 9876 or tcp port 9999 or tcp port 10911"),
    (["--port", "9876"], "tcp port 9876"),  # (a Stream server on RocketMQ's port)
]
PORT_OPTIONS = [options for options, _ in NO_HEURISTIC]


def filter_of(subcommand: str, options: list[str], monkeypatch, capsys, tmp_path) -> str:
    """The filter `subcommand -i lo OPTIONS` hands to the capture."""
    if subcommand == "report":
        options = [*options, "-o", str(tmp_path / "report.html")]
    handed = []

    def capture(interface, ports, heuristic, *_, **__):
        handed.append(capture_filter(ports, heuristic))
        raise CaptureError("(the test stops here)")

    monkeypatch.setattr(_live, "LiveCapture", capture)
    assert main([subcommand, "-i", "lo", *options]) == 2
    assert "(the test stops here)" in capsys.readouterr().err
    [bpf] = handed
    return bpf


@pytest.mark.parametrize("subcommand", ["frames", "analyze", "report"])
@pytest.mark.parametrize(("options", "expected"), NO_HEURISTIC)
def test_without_the_heuristic_the_filter_is_the_ports_asked_for(
    subcommand, options, expected, monkeypatch, capsys, tmp_path
):
    said = filter_of(subcommand, [*options, "--no-heuristic"], monkeypatch, capsys, tmp_path)
    assert said == expected


@pytest.mark.parametrize("subcommand", ["frames", "analyze", "report"])
@pytest.mark.parametrize("options", PORT_OPTIONS)
def test_with_the_heuristic_every_tcp_packet(subcommand, options, monkeypatch, capsys,
                                             tmp_path):  # fmt: skip
    assert filter_of(subcommand, options, monkeypatch, capsys, tmp_path) == "tcp"

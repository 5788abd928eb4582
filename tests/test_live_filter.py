"""The capture filter a live run (`frames -i`, `analyze -i`, `report -i`) gives its tool: the
ports the user named, every protocol's default ports when none were named, every TCP packet
with the heuristic. (The tool is not started: the filter is taken where the command hands it
to the capture; tests/test_cli_live.py holds a real run's.)"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import worsen
from rocketmq_support import both_protocols

from streamdissect.capture import CaptureError
from streamdissect.capture import live as live_capture
from streamdissect.capture.live import capture_filter
from streamdissect.cli import main
from streamdissect.cli._options import add_port_options, port_map

ROCKETMQ_CAPTURE = worsen.CAPTURES / "rocketmq" / "rmq-java-json.pcap"

# (options, the filter): written from the options' documented meaning, not by the code
NO_HEURISTIC = [
    ([], "tcp port 5552 or tcp port 9876 or tcp port 10911"),
    (["--port", "5552"], "tcp port 5552"),
    (["--port", "5553", "--port", "5552"], "tcp port 5552 or tcp port 5553"),
    (["--rocketmq-port", "9999"], "tcp port 9876 or tcp port 9999 or tcp port 10911"),
    (["--port", "5552", "--rocketmq-port", "9999"],
     "tcp port 5552 or tcp port 9876 or tcp port 9999 or tcp port 10911"),
    (["--port", "9876"], "tcp port 9876"),  # (a Stream server on RocketMQ's port: last)
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

    monkeypatch.setattr(live_capture, "LiveCapture", capture)
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


@pytest.fixture(scope="module")
def both(tmp_path_factory) -> Path:
    """A capture of a Stream session (5552) and a RocketMQ one (9876, 10911) interleaved."""
    return both_protocols(tmp_path_factory.mktemp("both") / "both.pcap",
                          worsen.CAPTURES / "rstream-publish-confirm-3.10.pcap",
                          ROCKETMQ_CAPTURE)  # fmt: skip


def server_ports_shown(argv: list[str], capsys) -> set[int]:
    """The server ports of the connections `frames --format jsonl ARGV` shows frames of."""
    assert main(["frames", "--format", "jsonl", *argv]) == 0
    lines = capsys.readouterr().out.splitlines()
    return {int(json.loads(line)["connection"].rsplit(":", 1)[1]) for line in lines}


@pytest.mark.parametrize(("options", "expected"), NO_HEURISTIC[:-1])
def test_a_file_is_dissected_on_the_ports_a_live_capture_keeps(options, expected, capsys,
                                                               both):  # fmt: skip
    """`--port 5552 --no-heuristic` on a file shows the Stream's connections only, as the
    live capture's filter keeps only them: what a live run shows and what its `-w` file
    shows later are the same connections."""
    in_capture = {5552, 9876, 10911}
    assert server_ports_shown([str(both)], capsys) == in_capture
    kept = {int(word) for word in expected.split() if word.isdigit()}
    shown = server_ports_shown([*options, "--no-heuristic", str(both)], capsys)
    assert shown == kept & in_capture


@pytest.mark.parametrize(("options", "expected"), [
    ([], {"stream": (5552,), "rocketmq": (9876, 10911)}),
    (["--port", "5553"], {"stream": (5553,), "rocketmq": (9876, 10911)}),
    (["--port", "5553", "--no-heuristic"], {"stream": (5553,)}),
    (["--rocketmq-port", "9999", "--no-heuristic"], {"rocketmq": (9876, 10911, 9999)}),
    # a port named for the Stream is no longer RocketMQ's default, with or without heuristic
    (["--port", "9876"], {"stream": (9876,), "rocketmq": (10911,)}),
    (["--port", "9876", "--no-heuristic"], {"stream": (9876,)}),
])  # fmt: skip
def test_the_ports_each_protocol_is_dissected_on(options, expected):
    parser = argparse.ArgumentParser()
    add_port_options(parser)
    parser.add_argument("--no-heuristic", action="store_true")
    shown = {name: each for name, each in port_map(parser.parse_args(options)).items() if each}
    assert shown == expected

"""`streamdissect frames` on RocketMQ captures: its lines through the protocol seam, -Y over
its fields, and --rocketmq-port for a server on another port. Expected values come from
the Java client's own trace in the capture's truth file."""

from __future__ import annotations

import json
import subprocess
import sys

import worsen
from rocketmq_support import truth

CAPTURE = worsen.CAPTURES / "rocketmq" / "rmq-java-json.pcap"
CLI = [sys.executable, "-m", "streamdissect"]


def frames(*args: str) -> list[str]:
    done = subprocess.run([*CLI, "frames", *args], capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def _producer_frames() -> list[dict]:
    producer = next(c for c in truth("rmq-java-json")["clients"] if c["name"] == "producer")
    return producer["report"]["frames"]


def test_jsonl_lines_carry_what_the_producer_sent_and_got():
    """Each frame of the producer's connections, as its trace saw it: code, opaque, flag."""
    traced = {(f["clientPort"], f["dir"].startswith("c->s"), f["opaque"], f["code"])
              for f in _producer_frames()}  # fmt: skip
    lines = [json.loads(line) for line in frames("--format", "jsonl", str(CAPTURE))]
    seen = {(int(row["connection"].split("-")[0].rsplit(":", 1)[1]), row["direction"] == "c2s",
             row["opaque"], row["code"]) for row in lines}  # fmt: skip
    assert traced <= seen


def test_display_filter_over_rocketmq_fields_and_text_lines():
    sends = [f for f in _producer_frames()
             if f["dir"] == "c->s request" and f["codeName"] == "SEND_MESSAGE_V2"]  # fmt: skip
    assert sends
    shown = frames("-Y", 'code_name == "SEND_MESSAGE_V2" and not response', str(CAPTURE))
    assert len(shown) == len(sends)
    assert all("SEND_MESSAGE_V2(310)" in line and "topic=" in line for line in shown)


def test_a_server_on_another_port_is_found_with_rocketmq_port(tmp_path):
    linktype, packets = worsen.read_pcap(CAPTURE)
    moved = worsen.rewrite_port(worsen.rewrite_port(packets, 10911, 20911), 9876, 19876)
    path = worsen.write_pcap(tmp_path / "moved.pcap", linktype, moved)
    plain = frames("--no-heuristic", str(CAPTURE))
    assert not frames("--no-heuristic", str(path))
    found = frames("--no-heuristic", "--rocketmq-port", "20911", "--rocketmq-port", "19876",
                   str(path))  # fmt: skip
    assert [line.split(None, 3)[3] for line in found] == [
        line.split(None, 3)[3].replace(":10911", ":20911").replace(":9876", ":19876")
        for line in plain]  # fmt: skip

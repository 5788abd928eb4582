"""Debian's real tshark run with the generated dissector, its PDML read back: for the
Wireshark tests. tshark runs in a scratch HOME, so that no personal plugin or preference of
this machine's user takes part, and every run is checked for Lua errors."""

from __future__ import annotations

import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "rabbitmq_stream."


def tshark() -> str:
    exe = shutil.which("tshark")
    assert exe, "tshark is missing: scripts/brokers.sh installs it (apt-get install -y tshark)"
    return exe


# What tshark says of a capture file it cannot read to the end (it shows the packets before).
DAMAGED = ("appears to be damaged or corrupt", "cut short in the middle of a packet")


def run(plugin: Path, capture: Path, *options: str, damaged_ok: bool = False,
        two_pass: bool = True) -> str:  # fmt: skip
    """tshark's standard output, after checking that the plugin ran without a Lua error;
    `damaged_ok`: a capture file tshark's reader gives up on part way is not a failure;
    `two_pass` False: tshark's one pass (no -2), each packet dissected once, in order."""
    home = plugin.parent / "home"
    home.mkdir(exist_ok=True)
    env = dict(os.environ, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    passes = ["-2"] if two_pass else []
    done = subprocess.run([tshark(), "-n", *passes, "-X", f"lua_script:{plugin}", "-r", str(capture),
                           *options], capture_output=True, env=env, timeout=600, check=False)  # fmt: skip
    out, err = done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")
    damaged = damaged_ok and any(words in err for words in DAMAGED)
    assert done.returncode == 0 or damaged, err
    assert "Lua" not in err, err  # (a script that does not load is only a message there)
    assert "Lua Error" not in out and "_ws.lua.error" not in out
    return out


@dataclass
class Pdu:
    """One rabbitmq_stream tree of a packet."""

    number: int  # the packet's frame number
    src: str  # "address:port"
    dst: str
    children: dict[str, list[ET.Element]] = field(default_factory=dict)  # direct fields
    all: dict[str, list[ET.Element]] = field(default_factory=dict)  # every field below

    def shows(self, name: str, direct: bool = False) -> list[str]:
        found = (self.children if direct else self.all).get(PREFIX + name, [])
        return [e.get("show", "") for e in found]

    def one(self, name: str) -> str | None:
        values = self.shows(name, direct=True)
        assert len(values) <= 1, (name, values)
        return values[0] if values else None

    def number_of(self, name: str) -> int | None:
        value = self.one(name)
        return None if value is None else int(value, 0)

    def experts(self) -> list[str]:
        return [name[len(PREFIX) + len("expert."):] for name in self.all
                if name.startswith(PREFIX + "expert.") for _ in self.all[name]]  # fmt: skip


def _endpoint(packet: ET.Element, side: str) -> str:
    address = packet.find(f"proto/field[@name='ip.{side}']")
    if address is None:
        address = packet.find(f"proto/field[@name='ipv6.{side}']")
    port = packet.find(f"proto/field[@name='tcp.{side}port']")
    host = address.get("show") if address is not None else "?"
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{port.get('show') if port is not None else '?'}"


def pdus(plugin: Path, capture: Path, *options: str, two_pass: bool = True) -> list[Pdu]:
    root = ET.fromstring(run(plugin, capture, "-T", "pdml", *options, two_pass=two_pass))
    found = []
    for packet in root.iter("packet"):
        number = int(packet.find("proto[@name='frame']/field[@name='frame.number']").get("show"))
        for proto in packet.findall("proto[@name='rabbitmq_stream']"):
            pdu = Pdu(number, _endpoint(packet, "src"), _endpoint(packet, "dst"))
            for child in proto:
                pdu.children.setdefault(child.get("name", ""), []).append(child)
            for element in proto.iter("field"):
                pdu.all.setdefault(element.get("name", ""), []).append(element)
            found.append(pdu)
    return found


def connection_capture(path: Path, frames: list[tuple[str, bytes]], port: int = 5552,
                       split_every: int = 0) -> Path:
    """A pcap of one TCP connection, 127.0.0.1:40000 to 127.0.0.2:`port`, carrying each
    (direction, frame) as it comes, in segments of 32 KiB at most; with `split_every` N,
    every Nth frame also split after its first 5 bytes."""
    import struct

    import worsen

    ends = {"c2s": (b"\x7f\x00\x00\x01", 40000, b"\x7f\x00\x00\x02", port)}
    ends["s2c"] = (*ends["c2s"][2:], *ends["c2s"][:2])
    seq = {"c2s": 1000, "s2c": 5000}
    packets, ts = [], 1_700_000_000 * 10**9

    def segment(direction: str, flags: int, payload: bytes) -> None:
        src, sport, dst, dport = ends[direction]
        other = "s2c" if direction == "c2s" else "c2s"
        tcp = struct.pack(">HHIIBBHHH", sport, dport, seq[direction], seq[other], 0x50, flags,
                          65535, 0, 0)  # fmt: skip
        ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 40 + len(payload), 0, 0x4000, 64, 6, 0,
                         src, dst)  # fmt: skip
        data = b"\x00" * 12 + b"\x08\x00" + ip + tcp + payload
        packets.append((ts + 1000 * len(packets), data, len(data)))
        seq[direction] += len(payload) + (1 if flags & 0x02 else 0)

    segment("c2s", 0x02, b"")  # SYN
    segment("s2c", 0x12, b"")  # SYN, ACK
    for n, (direction, frame) in enumerate(frames, 1):
        pieces = [frame[:5], frame[5:]] if split_every and n % split_every == 0 else [frame]
        for piece in pieces:
            for at in range(0, len(piece), 32768):  # (an IPv4 packet holds 64 KiB at most)
                segment(direction, 0x18, piece[at : at + 32768])
    return worsen.write_pcap(path, 1, packets)

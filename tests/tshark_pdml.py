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


def run(plugin: Path, capture: Path, *options: str) -> str:
    """tshark's standard output, after checking that the plugin ran without a Lua error."""
    home = plugin.parent / "home"
    home.mkdir(exist_ok=True)
    env = dict(os.environ, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    done = subprocess.run([tshark(), "-n", "-2", "-X", f"lua_script:{plugin}", "-r", str(capture),
                           *options], capture_output=True, env=env, timeout=600, check=False)  # fmt: skip
    out, err = done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")
    assert done.returncode == 0, err
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


def pdus(plugin: Path, capture: Path, *options: str) -> list[Pdu]:
    root = ET.fromstring(run(plugin, capture, "-T", "pdml", *options))
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

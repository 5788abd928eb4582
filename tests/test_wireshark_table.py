"""The dissector is generated from the protocol table: deterministic, complete (a command
added to the table reaches the plugin, and tshark decodes it; a wire type or derived field
the generator cannot show stops generation), registered on the ports and by the heuristic,
and SASL passwords stay hidden unless the preference shows them."""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import tshark_pdml
import worsen
from test_bulk_engine import _frame
from test_secrets import GUEST, WRONG, leaks
from tshark_pdml import connection_capture, pdus

from streamdissect.protocols.stream import spec
from streamdissect.protocols.stream.primitives import (
    INT64,
    STRING,
    U8,
    U32,
    U64,
    ArrayType,
    MapType,
    StructType,
    TrailingType,
    WireType,
)
from streamdissect.protocols.stream.spec import Field, Message
from streamdissect.wireshark import GenerationError, generate
from streamdissect.wireshark.generate import HEADER

RUNTIME = (Path(__file__).resolve().parent.parent / "streamdissect" / "wireshark" /
           "runtime.lua").read_text()  # fmt: skip


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rabbitmq_stream.lua"
    path.write_text(text)
    return path


def test_generation_is_deterministic(tmp_path):
    """The same text twice in one process, in processes with other hash seeds, and from the
    CLI whether written with -o or to standard output."""
    first = generate()
    assert generate() == first
    outputs = []
    for seed in ("1", "2", "random"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        outputs.append(subprocess.run([sys.executable, "-m", "streamdissect", "wireshark"],
                                      capture_output=True, text=True, check=True,
                                      env=env).stdout)  # fmt: skip
    subprocess.run([sys.executable, "-m", "streamdissect", "wireshark", "-o",
                    str(tmp_path / "out.lua")], check=True)  # fmt: skip
    assert set(outputs) == {first} and (tmp_path / "out.lua").read_text() == first


def test_every_message_and_version_of_the_table_is_in_the_plugin():
    text = generate()
    for message in spec.MESSAGES:
        block = text.split(f"MESSAGES[0x{message.key:04x}] = ", 1)[1].split("\nMESSAGES[")[0]
        assert f'name = "{message.class_name}"' in block
        for version in message.versions:
            assert f"[{version}] = " in block
        for field in message.fields:
            assert f'name = "{field.name}"' in block


def test_the_runtime_reads_every_kind_and_every_field_it_names_is_declared():
    text = generate()
    declared = set(re.findall(r'^F\["([^"]+)"\] = ProtoField\.', text, re.MULTILINE))
    kinds = set(re.findall(r'kind = "(\w+)"', text))
    assert kinds and all(f"function R.{kind}(" in RUNTIME for kind in kinds)
    named = re.findall(r'\b(?:field|timestamp|trailer|publishing_id|filter_value) = "([^"]+)"',
                       text)  # fmt: skip
    assert named and set(named) <= declared
    assert set(re.findall(r"\bF\.(\w+)", RUNTIME)) <= declared
    assert set(HEADER) <= declared


# --- a command added to the table ------------------------------------------------------------

IMAGINARY = 0x0040


def imaginary_messages() -> list[Message]:
    """A request/response pair the table does not have, using most wire types."""
    request = Message(
        command="Imaginary", key=IMAGINARY, response=False, sender="client",
        correlation_id=True, code=False, versions=(1, 2), class_name="Imaginary",
        fields=(Field("widget_id", U8), Field("label", STRING), Field("tags", ArrayType(STRING)),
                Field("gauges", ArrayType(StructType((("gauge", STRING), ("level", INT64))))),
                Field("extra", MapType(STRING, STRING)), Field("serial", U64, since=2),
                Field("note", TrailingType(STRING))),
    )  # fmt: skip
    response = Message(
        command="Imaginary", key=IMAGINARY | 0x8000, response=True, sender="server",
        correlation_id=True, code=True, versions=(1,), class_name="ImaginaryResponse",
        fields=(Field("accepted", U32),),
    )  # fmt: skip
    return [request, response]


def s(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def imaginary_frames() -> list[bytes]:
    body = (struct.pack(">IB", 7, 3) + s("lamp") + struct.pack(">i", 2) + s("red") + s("big")
            + struct.pack(">i", 1) + s("volts") + struct.pack(">q", -5)
            + struct.pack(">i", 1) + s("k") + s("v"))  # fmt: skip
    return [
        _frame(IMAGINARY, 1, body + s("a note")),
        _frame(IMAGINARY | 0x8000, 1, struct.pack(">IHI", 7, 1, 42)),
        _frame(IMAGINARY, 2, body + struct.pack(">Q", 2**64 - 2)),  # v2: serial, no note
    ]


def test_a_command_added_to_the_table_reaches_the_plugin(tmp_path, monkeypatch):
    monkeypatch.setattr(spec, "MESSAGES", spec.MESSAGES + imaginary_messages())
    plugin = write(tmp_path, generate())
    request, response, later = imaginary_frames()
    capture = connection_capture(tmp_path / "imaginary.pcap",
                                 [("c2s", request), ("s2c", response), ("c2s", later)])  # fmt: skip
    found = pdus(plugin, capture)
    assert len(found) == 3
    v1, response, v2 = found
    assert v1.one("command") == "Imaginary" and v1.number_of("correlation_id") == 7
    assert v1.one("widget_id") == "3" and v1.one("label") == "lamp"
    assert v1.shows("tag") == ["red", "big"] and v1.shows("gauge") == ["volts"]
    assert v1.shows("level") == ["-5"] and v1.one("note") == "a note"
    assert v1.shows("extra.key") == ["k"] and v1.shows("extra.value") == ["v"]
    assert v2.one("serial") == str(2**64 - 2) and v2.one("note") is None
    assert response.one("command") == "Imaginary" and response.one("accepted") == "42"
    assert response.number_of("code") == 1 and response.number_of("response_to") == v1.number
    assert v1.number_of("response_in") == response.number
    assert not any(p.experts() for p in found)


class Geodesic(WireType):
    name = "geodesic"
    column = "binary"


@pytest.mark.parametrize(
    "fields, derived, complaint",
    [
        ((Field("where", Geodesic()),), (), "no dissector reader for wire type Geodesic"),
        ((Field("widget_id", U8),), (Field("weight", U32),), "no rule for derived field"),
        ((Field("version", U8),), (), "name of a frame header field"),
        ((Field("stream", U8),), (), "'stream': a int and a string"),
    ],
)
def test_what_the_plugin_cannot_show_stops_generation(monkeypatch, fields, derived, complaint):
    """A command whose field has no reader, a derived field without a rule, or a field that
    would break a filter name is refused: the plugin is never made without it."""
    odd = Message(command="Odd", key=0x0041, response=False, sender="client",
                  correlation_id=True, code=False, versions=(1,), fields=fields,
                  derived=derived, class_name="Odd")  # fmt: skip
    monkeypatch.setattr(spec, "MESSAGES", spec.MESSAGES + [odd])
    with pytest.raises(GenerationError, match=re.escape(complaint)):
        generate()


# --- ports and the heuristic ---------------------------------------------------------------


def test_ports_preference_and_heuristic(plugin, tmp_path):
    """A broker on 5553 is found by the heuristic; with the heuristic off, only when the
    ports preference names 5553; a capture moved to port 15552 is found too."""
    capture = next(p for p in worsen.corpus_captures() if p.name == "raw-deliver-v2-4.0.pcap")
    found = len(pdus(plugin, capture))
    assert found > 0
    off = ("--disable-heuristic", "rabbitmq_stream_tcp")
    assert pdus(plugin, capture, *off) == []
    assert len(pdus(plugin, capture, *off, "-o", "rabbitmq_stream.ports:5550-5553")) == found
    linktype, packets = worsen.read_pcap(next(p for p in worsen.corpus_captures()
                                              if p.name == "raw-errors-3.10.pcap"))  # fmt: skip
    moved = worsen.write_pcap(tmp_path / "moved.pcap", linktype,
                              worsen.rewrite_port(packets, 5552, 15552))  # fmt: skip
    assert len(pdus(plugin, moved)) == 50 and pdus(plugin, moved, *off) == []



def test_a_client_port_wireshark_gives_to_another_dissector(plugin, tmp_path):
    """Wireshark asks a port's dissector before any heuristic, the client's ephemeral port
    too: a client on 34980 (EtherCAT's, `ecatf`) of a broker on 5553 is taken by that
    dissector and the heuristic is never asked (an 8-connection recording of the 4.0 broker
    hit it once). Naming the server's port in the preference finds every frame, as README
    says."""
    capture = next(p for p in worsen.corpus_captures() if p.name == "raw-deliver-v2-4.0.pcap")
    found = len(pdus(plugin, capture))
    linktype, packets = worsen.read_pcap(capture)
    client = next(t.flow[1] for _, data, _ in packets if (t := worsen.tcp_of(data)) and t.flow[3] == 5553)
    moved = worsen.write_pcap(tmp_path / "ecatf.pcap", linktype,
                              worsen.rewrite_port(packets, client, 34980))  # fmt: skip
    assert len(pdus(plugin, moved)) < found  # (the scene is real: the heuristic lost it)
    assert len(pdus(plugin, moved, "-o", "rabbitmq_stream.ports:5552,5553")) == found
    # `streamdissect wireshark --port 5553 CAPTURE` sets that preference for its tshark run
    lines = [subprocess.run([sys.executable, "-m", "streamdissect", "wireshark", *ports, str(moved)],
                            capture_output=True, text=True, check=True).stdout.splitlines()
             for ports in ((), ("--port", "5553"))]  # fmt: skip
    shown = [sum(" RabbitMQ Stream " in line for line in run) for run in lines]
    assert shown[0] < shown[1]
    # with the port named, a packet is TCP or RabbitMQ Stream, none another dissector's
    assert all(" TCP " in line or " RabbitMQ Stream " in line for line in lines[1])

# --- secrets -----------------------------------------------------------------------------------


@pytest.mark.parametrize("capture", [WRONG, GUEST], ids=["wrong-password", "guest"])
def test_sasl_passwords_are_hidden_unless_the_preference_shows_them(plugin, capture):
    path, secret = capture
    tree = tshark_pdml.run(plugin, path, "-V")
    assert "SASL data" in tree and "Username: guest" in tree
    assert leaks(tree, secret) == []
    ours = [f"{e.get('show')} {e.get('value')} {e.get('showname')}" for pdu in pdus(plugin, path)
            for elements in pdu.all.values() for e in elements]  # fmt: skip
    assert ours and leaks("\n".join(ours), secret) == []
    shown = tshark_pdml.run(plugin, path, "-V", "-o", "rabbitmq_stream.show_secrets:TRUE")
    assert leaks(shown, secret) != []

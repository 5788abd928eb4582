"""Which TCP ports carry RabbitMQ Stream for scapy (both directions): 5552 by default; and
StreamFrame's reassembly hook, given to the layer here (the layers do not import the
reassembly that builds them)."""

from __future__ import annotations

from scapy.layers.inet import TCP
from scapy.packet import bind_layers, split_layers

from streamdissect.scapy.layers import StreamFrame
from streamdissect.scapy.reassembly import tcp_reassemble
from streamdissect.scapy.settings import BOUND_PORTS

DEFAULT_PORT = 5552
StreamFrame.tcp_reassemble = classmethod(tcp_reassemble)  # type: ignore[attr-defined]


def bind_port(port: int) -> None:
    """Dissect TCP traffic from or to `port` as RabbitMQ Stream (e.g. 5553, or a TLS
    terminator's plain side). Connections that start after the call see it."""
    bind_layers(TCP, StreamFrame, sport=port)
    bind_layers(TCP, StreamFrame, dport=port)
    BOUND_PORTS.add(port)


def unbind_port(port: int) -> None:
    split_layers(TCP, StreamFrame, sport=port)
    split_layers(TCP, StreamFrame, dport=port)
    BOUND_PORTS.discard(port)

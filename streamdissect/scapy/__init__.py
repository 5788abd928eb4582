"""RabbitMQ Stream in scapy: importing this module registers the layer on TCP 5552.

    from scapy.all import sniff, TCPSession
    from streamdissect.scapy import StreamFrame, Deliver, stream_frames
    packets = sniff(offline="captures/rstream-consume-credit-3.10.pcap", session=TCPSession)
    delivers = [f for f in stream_frames(packets) if Deliver in f]

Classes are generated from protocol/spec.py (see layers.py); reassembly goes through the
core's TCP reassembler and framer (reassembly.py), so gaps are shown, never zero-filled.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from scapy.packet import Packet

# importing reassembly wraps TCPSession.recv: see there
from streamdissect.scapy import reassembly  # noqa: F401
from streamdissect.scapy.bind import BOUND_PORTS, DEFAULT_PORT, bind_port, unbind_port
from streamdissect.scapy.layers import (
    BODY_CLASSES,
    FrameBody,
    PublishedMessage,
    StreamFrame,
    StreamMalformed,
    StreamSegment,
    StreamTruncated,
    StreamUnknown,
)
from streamdissect.scapy.settings import conf

bind_port(DEFAULT_PORT)
globals().update({cls.__name__: cls for cls in BODY_CLASSES.values()})


def stream_frames(packets: Iterable[Packet]) -> Iterator[StreamFrame]:
    """Every frame of sniffed packets, in order (a packet may end several frames)."""
    for packet in packets:
        first = packet.getlayer(StreamFrame)
        if first is not None:
            yield from first.frames()


__all__ = [
    "BODY_CLASSES",
    "BOUND_PORTS",
    "FrameBody",
    "PublishedMessage",
    "StreamFrame",
    "StreamMalformed",
    "StreamSegment",
    "StreamTruncated",
    "StreamUnknown",
    "bind_port",
    "conf",
    "stream_frames",
    "unbind_port",
]
__all__ += [cls.__name__ for cls in BODY_CLASSES.values()]  # Subscribe, Deliver, ...

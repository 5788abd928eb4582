"""Capture files -> packets -> TCP segments (streaming, bounded memory)."""

from streamdissect.capture.errors import AnomalyReport, CaptureError, PacketProblem
from streamdissect.capture.files import open_capture
from streamdissect.capture.pcap import Packet
from streamdissect.capture.segment import ACK, FIN, PSH, RST, SYN, Segment, tcp_segment

__all__ = [
    "ACK",
    "FIN",
    "PSH",
    "RST",
    "SYN",
    "AnomalyReport",
    "CaptureError",
    "Packet",
    "PacketProblem",
    "Segment",
    "open_capture",
    "tcp_segment",
]

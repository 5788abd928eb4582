"""Capture files -> packets -> TCP segments (streaming, bounded memory)."""

from .errors import AnomalyReport, CaptureError, PacketProblem
from .files import open_capture
from .pcap import Packet
from .segment import ACK, FIN, PSH, RST, SYN, Segment, tcp_segment

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

"""TCP: connections, per-direction reassembly, gaps and other anomalies (I/O-free)."""

from streamdissect.tcp.connection import FlowTable, TcpConnection
from streamdissect.tcp.reassembly import (
    DEFAULT_OOO_CAP,
    DirectionReassembler,
    NullSink,
    StreamSink,
)

__all__ = [
    "DEFAULT_OOO_CAP",
    "DirectionReassembler",
    "FlowTable",
    "NullSink",
    "StreamSink",
    "TcpConnection",
]

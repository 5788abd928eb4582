"""TCP: connections, per-direction reassembly, gaps and other anomalies (I/O-free)."""

from .connection import FlowTable, TcpConnection
from .reassembly import DEFAULT_OOO_CAP, DirectionReassembler, NullSink, StreamSink

__all__ = [
    "DEFAULT_OOO_CAP",
    "DirectionReassembler",
    "FlowTable",
    "NullSink",
    "StreamSink",
    "TcpConnection",
]

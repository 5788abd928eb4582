"""The streaming engine, the reference: packet by packet through the state's flows."""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from operator import itemgetter

from streamdissect.capture import PacketProblem, open_capture, tcp_segment
from streamdissect.capture.pcap import Packet
from streamdissect.engine.anomalies import Anomaly
from streamdissect.engine.state import DissectionState, FrameEvent


def run(state: DissectionState, paths: list[str]) -> Iterator[FrameEvent | Anomaly]:
    """Frames and anomalies of `paths` (merged in time order). Every file is opened here, so
    a file that is no capture raises CaptureError at once."""
    packets = _packets(state, paths)
    return _run(state, packets)


def _packets(state: DissectionState, paths: list[str]) -> Iterator[Packet]:
    sources = [open_capture(p, state._file_reporter(p), state.on_read) for p in paths]
    if len(sources) == 1:
        return sources[0]
    return heapq.merge(*sources, key=itemgetter(0))


def _run(state: DissectionState, packets: Iterator[Packet]) -> Iterator[FrameEvent | Anomaly]:
    out = state._out
    flows = state.start_flows()
    segment = flows.segment
    ts = 0
    for ts, linktype, data, _wire_len, file_offset in packets:
        try:
            seg = tcp_segment(linktype, data)
        except PacketProblem as problem:
            state._anomaly(ts, None, None, problem.kind, file_offset, len(data), problem.detail)
            seg = None
        if seg is not None:
            segment(seg, ts)
        if out:
            yield from out
            out.clear()
    flows.finish(ts)
    for stream in state._streams:
        for framer in stream.framers:
            framer.finish(ts)
    yield from out
    out.clear()

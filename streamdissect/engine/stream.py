"""The streaming engine, the reference: packet by packet through the state's flows."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from operator import itemgetter
from typing import Any

from streamdissect.capture import PacketProblem, Segment, open_capture, tcp_segment
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


def dissect_packet(state: DissectionState, segment: Callable[[Segment, int], None], ts: int,
                   linktype: int, data: Any, file_offset: int) -> None:  # fmt: skip
    """One packet, the exact way: its TCP segment to `segment` (the flows' table), or the
    anomaly of a packet that is no TCP segment we can read."""
    try:
        seg = tcp_segment(linktype, data)
    except PacketProblem as problem:
        state.anomaly(ts, problem.kind, file_offset, len(data), problem.detail)
        return
    if seg is not None:
        segment(seg, ts)


def _run(state: DissectionState, packets: Iterator[Packet]) -> Iterator[FrameEvent | Anomaly]:
    out = state._out
    flows = state.start_flows()
    segment = flows.segment
    ts = 0
    for ts, linktype, data, _wire_len, file_offset in packets:
        dissect_packet(state, segment, ts, linktype, data, file_offset)
        if out:
            yield from out
            out.clear()
    flows.finish(ts)
    for stream in state._streams:
        for framer in stream.framers:
            framer.finish(ts)
    yield from out
    out.clear()

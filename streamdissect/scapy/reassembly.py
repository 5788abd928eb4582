"""`StreamFrame.tcp_reassemble`: what scapy's TCPSession and StreamSocket call.

scapy's TCPSession hands over a buffer in which lost bytes are zeros, and says nothing of
it. So the buffer is not read at all: each packet's own TCP segment (`metadata["original"]`)
goes through the core's pipeline (`Dissector.push`: the TCP reassembler and the framer that
`streamdissect frames` uses), which waits for out-of-order data, drops retransmitted bytes,
declares gaps, resynchronises after them and says so. The packet then carries the frames it
completed, each with the bytes the framer framed; lost bytes are never decoded.

A packet that completes no frame carries a `StreamSegment` (its own bytes), so scapy's
buffer is emptied at every packet and memory stays bounded whatever the stream holds.

Frames always come out on a packet of their own direction. When a segment is lost, the
frames behind the hole wait until the hole is given up: the peer acknowledges past it, or
HOLE_PATIENCE packets later. A packet of the other direction (the peer's ACK) then releases
them; they come out on a packet of their own: the headers of their direction's last packet,
the sequence number of their first byte, the release's time, yielded just before the packet
that released them. At the end of an offline capture the holes still open are given up and
the frames behind them come out the same way. Both need a packet that scapy's TCPSession
hands over on its own: importing the layer wraps `TCPSession.recv` (`release_frames`), and
nothing else of scapy changes. Without it (a session that calls `tcp_reassemble` itself),
such frames come out on their direction's next packet.

StreamSocket (and TCPSession(app=True)) pass a contiguous stream instead, with no packet:
then the first whole frame is returned and the rest left as Padding for the next call.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from functools import partial
from typing import Any

from scapy.config import conf as scapy_conf
from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.packet import Packet
from scapy.sessions import TCPSession

from streamdissect.capture.segment import ACK, SYN, Segment
from streamdissect.engine.dissect import Anomaly, Dissector, FrameEvent
from streamdissect.protocols.stream.framing import StreamFramer, header_plausible
from streamdissect.scapy.layers import StreamFrame, StreamSegment
from streamdissect.scapy.settings import BOUND_PORTS, conf
from streamdissect.tcp.reassembly import HALF_SEQ_SPACE, NOT_CAPTURED, SEQ_MASK

SESSION_KEY = "streamdissect"
SENDERS = {"c2s": "client", "s2c": "server"}
# How far into a direction data from before its first segment is still looked for (reordering
# moves segments by a few packets; past this, sequence numbers may have gone round).
REORDER_WINDOW = 1 << 20
# TCPSession shows no pure ACKs and no end of capture, which is when the core calls a hole a
# gap: here a hole still open this many data packets of its connection later is one.
HOLE_PATIENCE = 4
MAX_NOTES = 64  # anomalies kept for one frame; past that, counted
_size = struct.Struct(">I").unpack_from
_header = struct.Struct(">IHH").unpack_from


_released = threading.local()  # .pipelines: those holding frames for packets of their own


def tcp_reassemble(cls: type, data: bytes, metadata: dict,
                   session: dict | None = None) -> Packet | None:  # fmt: skip
    """scapy's reassembly hook (TCPSession, StreamSocket), StreamFrame's classmethod."""
    return reassemble(data, metadata, session)


def reassemble(data: bytes, metadata: dict, session: dict | None) -> Packet | None:
    """With the packet and a session to keep the connection's state in (TCPSession): the
    frames that packet completed. Else `data` is a contiguous stream (StreamSocket)."""
    original = metadata.get("original")
    if session is not None and isinstance(original, Packet) and original.haslayer(TCP):
        pipeline = session.get(SESSION_KEY)
        if pipeline is None:
            pipeline = session[SESSION_KEY] = ConnectionPipeline(frozenset(BOUND_PORTS))
        return pipeline.packet(original)
    return next_frame(data)


def next_frame(data: bytes) -> Packet | None:
    """The first whole frame of a contiguous stream, the rest as Padding; None when more
    bytes are needed. A size field beyond `conf.max_frame` is garbage: all of `data` becomes
    one malformed frame instead of waiting for bytes that will never make a frame."""
    if len(data) < 4:
        return None
    size = _size(data)[0]
    if size < 4 or size > conf.max_frame:
        return StreamFrame(data)
    end = 4 + size
    if len(data) < end:
        return None
    frame = StreamFrame(data[:end])
    if len(data) > end:
        frame.add_payload(scapy_conf.padding_layer(data[end:]))
    return frame


class FrameKeepingFramer(StreamFramer):
    """The core's Stream framer, remembering the bytes of every frame it emits (by record)."""

    __slots__ = ("last_frame",)

    def __init__(self, emit: Any, report: Any, *limits: Any, kept: dict[int, bytes]) -> None:
        def emit_keeping(offset: int, ts_ns: int, record: Any) -> None:
            kept[id(record)] = self.last_frame
            emit(offset, ts_ns, record)

        super().__init__(emit_keeping, report, *limits)
        self.last_frame = b""

    def _decode(self, offset: int, ts_ns: int, frame: bytes, size: int, cut: bool) -> None:
        self.last_frame = frame
        super()._decode(offset, ts_ns, frame, size, cut)

    def _emit_head(self, offset: int, ts_ns: int, head: bytes, size: int) -> None:
        self.last_frame = head
        super()._emit_head(offset, ts_ns, head, size)


class ConnectionPipeline:
    """What one TCP connection (scapy's session dict) keeps between packets."""

    def __init__(self, ports: frozenset[int]) -> None:
        self.ports = ports
        self.kept: dict[int, bytes] = {}
        # Whole frames up to max_frame (no head-only Delivers): scapy users get every byte.
        self.dissector = Dissector(
            ports=ports,
            heuristic=False,
            max_frame=conf.max_frame,
            deliver_keep_limit=None,
            engine="stream",
            hole_patience=HOLE_PATIENCE,
            protocols=("stream",),
        )
        self.dissector.framer_class = partial(FrameKeepingFramer, kept=self.kept)  # type: ignore[assignment]
        # sender -> (sequence number of its first data, bytes seen since)
        self.started: dict[tuple[bytes, int], tuple[int, int]] = {}
        self.framed_to: dict[str, int] = {}  # direction -> stream offset after its last frame
        self.notes: dict[str, list[str]] = {}  # direction -> anomalies since its last frame
        self.more_notes: dict[str, int] = {}  # direction -> how many past MAX_NOTES
        self.last_packet: dict[str, Packet] = {}  # direction -> its last packet (headers)
        self.first_seq: dict[str, int] = {}  # direction -> sequence number of offset 0
        # frames of a direction released by a packet of the other one (or the end of the
        # capture), waiting for a packet of their own: (direction, ts_ns, frames)
        self.released: list[tuple[str, int, list[StreamFrame]]] = []
        self.last_ts_ns = 0

    def packet(self, pkt: Packet) -> Packet:
        found = segment_of(pkt)
        if found is None:
            return StreamSegment(load=b"")
        segment, payload = found
        ts_ns = int(pkt.time * 1_000_000_000)
        self.last_ts_ns = max(self.last_ts_ns, ts_ns)
        direction = "c2s" if segment[3] in self.ports else "s2c"
        self.last_packet[direction] = pkt
        sender_side = SENDERS[direction]
        sender = (segment[0], segment[1])
        raised: list[str] = []
        if len(payload) < segment[8]:
            # snaplen; or scapy itself, which reads at most 65535 bytes of a packet (a full
            # 64 KiB loopback segment loses its last 14): those bytes are missing, not zeros
            note = (
                f"{NOT_CAPTURED} len {segment[8] - len(payload)}: {len(payload)} of "
                f"{segment[8]} payload bytes of a segment were captured"
            )
            self._note(direction, note)
            raised.append(note)
        start, seen = self.started.get(sender, (None, 0))
        self.started[sender] = (segment[4] if start is None else start, seen + len(payload))
        if start is None:
            self.first_seq[direction] = segment[4]
            if starts_a_frame(payload):
                # scapy's TCPSession never shows us a SYN: a direction whose first data
                # starts with a frame header is taken to start there (else: mid-stream)
                self.dissector.push(self._syn(segment), ts_ns)
        elif (
            payload
            and seen < REORDER_WINDOW
            and 0 < (start - segment[4]) & SEQ_MASK < HALF_SEQ_SPACE
        ):
            # Data from before the first segment seen (they came reordered): the stream
            # was taken to start later, so these bytes cannot be placed. Said, not framed.
            note = (
                f"segment_before_start len {len(payload)}: data before the first segment"
                " seen in this direction (reordered), not framed"
            )
            self._note(direction, note)
            marker = StreamSegment(load=payload)
            marker.fields.update(sender=sender_side, anomalies=[note])
            return marker
        frames = self._waiting(direction)  # (released earlier, no packet of their own since)
        for event in self.dissector.push(segment, ts_ns):
            if isinstance(event, FrameEvent):
                if event.direction == direction:
                    frames.append(self._frame(event))
                else:  # released by this packet: it comes out on a packet of its own
                    self._release(event.direction, event.ts_ns, [self._frame(event)])
            elif isinstance(event, Anomaly) and event.kind != NOT_CAPTURED:  # (said per packet)
                note = describe(event)
                self._note(event.direction or direction, note)
                if event.direction == direction:
                    raised.append(note)
        if not frames:
            marker = StreamSegment(load=payload)
            marker.fields.update(sender=sender_side, anomalies=raised)
            return marker
        first = frames[0]
        for frame in frames[1:]:
            first.add_payload(frame)
        return first

    def _release(self, direction: str, ts_ns: int, frames: list[StreamFrame]) -> None:
        if self.released and self.released[-1][0] == direction:
            self.released[-1][2].extend(frames)  # (one packet for frames released together)
            return
        pending = getattr(_released, "pipelines", None)
        if pending is None:
            pending = _released.pipelines = []
        if self not in pending:
            pending.append(self)
        self.released.append((direction, ts_ns, frames))

    def _waiting(self, direction: str) -> list[StreamFrame]:
        """Frames of `direction` released while nothing took them out on a packet of their
        own (no TCPSession.recv around the call): this packet of theirs carries them first."""
        frames: list[StreamFrame] = []
        if self.released:
            kept = []
            for item in self.released:
                if item[0] == direction:
                    frames.extend(item[2])
                else:
                    kept.append(item)
            self.released = kept
        return frames

    def released_packets(self) -> Iterator[Packet]:
        """Each run of released frames on a packet of its direction: that direction's last
        packet's headers, the sequence number of the first frame's first byte."""
        released, self.released = self.released, []
        for direction, ts_ns, frames in released:
            head = self.last_packet[direction].copy()
            tcp = head[TCP]
            tcp.remove_payload()
            offset = frames[0].stream_offset
            tcp.seq = (self.first_seq[direction] + offset) & SEQ_MASK
            tcp.flags = "PA"
            tcp.chksum = None
            for layer in (IP, IPv6):
                if layer in head:
                    setattr(head[layer], "len" if layer is IP else "plen", None)
                    if layer is IP:
                        head[IP].chksum = None
            first = frames[0]
            for frame in frames[1:]:
                first.add_payload(frame)
            packet = head / first
            packet.time = ts_ns / 1_000_000_000
            packet.wirelen = None
            yield packet

    def finish(self) -> None:
        """End of the capture: holes still open are given up, the frames behind them
        released (and said: the gap is on the first of them)."""
        dissector = self.dissector
        if dissector._flows is None:
            return
        for event in dissector._finish(self.last_ts_ns):
            if isinstance(event, FrameEvent):
                self._release(event.direction, event.ts_ns, [self._frame(event)])
            elif isinstance(event, Anomaly) and event.direction and event.kind != NOT_CAPTURED:
                self._note(event.direction, describe(event))

    def _note(self, direction: str, note: str) -> None:
        """Keep an anomaly for the next frame of `direction`: the first MAX_NOTES, then a
        count (a stream that never makes a frame again must not grow this)."""
        notes = self.notes.setdefault(direction, [])
        if len(notes) < MAX_NOTES:
            notes.append(note)
        else:
            self.more_notes[direction] = self.more_notes.get(direction, 0) + 1

    def _notes_for_frame(self, direction: str) -> list[str]:
        """The anomalies kept since `direction`'s previous frame, then forgotten."""
        notes = self.notes.pop(direction, [])
        more = self.more_notes.pop(direction, 0)
        return [*notes, f"and more anomalies: {more}"] if more else notes

    def _syn(self, segment: Segment) -> Segment:
        src, sport, dst, dport, seq = segment[:5]
        flags = SYN | (ACK if sport in self.ports else 0)
        return (src, sport, dst, dport, (seq - 1) & SEQ_MASK, 0, flags, memoryview(b""), 0)

    def _frame(self, event: FrameEvent) -> StreamFrame:
        record = event.record
        frame = StreamFrame(self.kept.pop(id(record)))
        direction, offset = event.direction, event.stream_offset
        gap = max(offset - self.framed_to.get(direction, 0), 0)
        self.framed_to[direction] = offset + 4 + (record.size or 0)
        # (set in the fields dict: these are not on the wire, the built bytes stay cached)
        frame.fields.update(
            sender=SENDERS[direction],
            stream_offset=offset,
            gap_before=gap,
            anomalies=self._notes_for_frame(direction),
        )
        return frame


def _take_released() -> Iterator[Packet]:
    pipelines = getattr(_released, "pipelines", None)
    while pipelines:
        _released.pipelines = []
        for pipeline in pipelines:
            yield from pipeline.released_packets()
        pipelines = _released.pipelines


def _finish_session(session: TCPSession) -> Iterator[Packet]:
    for state in list(session.tcp_sessions.values()):
        pipeline = state.pop(SESSION_KEY, None) if isinstance(state, dict) else None
        if isinstance(pipeline, ConnectionPipeline):
            pipeline.finish()
    yield from _take_released()


def release_frames(recv: Any) -> Any:
    """TCPSession.recv, also yielding the packets of released frames: before the packet
    that released them, and when an offline capture ends (the holes still open given up)."""

    def recv_releasing(self: TCPSession, sock: Any) -> Iterator[Packet]:
        try:
            for packet in recv(self, sock):
                yield from _take_released()
                yield packet
            yield from _take_released()
        except EOFError:
            yield from _take_released()
            yield from _finish_session(self)
            raise

    recv_releasing.released = True  # type: ignore[attr-defined]
    recv_releasing.__doc__ = recv.__doc__
    return recv_releasing


if not getattr(TCPSession.recv, "released", False):
    TCPSession.recv = release_frames(TCPSession.recv)  # type: ignore[method-assign]


def describe(anomaly: Anomaly) -> str:
    text = f"{anomaly.kind} at {anomaly.stream_offset} len {anomaly.length}"
    return f"{text}: {anomaly.detail}" if anomaly.detail else text


def starts_a_frame(payload: bytes) -> bool:
    if len(payload) < 8:
        return len(payload) > 0  # too short to tell: the usual case is a start
    return header_plausible(*_header(payload), conf.max_frame)


def segment_of(pkt: Packet) -> tuple[Segment, bytes] | None:
    """The packet's TCP segment as the core's capture layer makes it (capture.segment)."""
    tcp = pkt[TCP]
    ip = tcp.underlayer
    extensions = 0  # IPv6 extension headers between the IP header and TCP
    while ip is not None and not isinstance(ip, (IP, IPv6)):
        extensions += len(ip.self_build())
        ip = ip.underlayer
    header = (tcp.dataofs or 5) * 4
    if isinstance(ip, IP):
        src, dst = socket.inet_aton(ip.src), socket.inet_aton(ip.dst)
        ip_payload = ip.len - ip.ihl * 4 if ip.len is not None and ip.ihl is not None else None
    elif isinstance(ip, IPv6):
        src = socket.inet_pton(socket.AF_INET6, ip.src)
        dst = socket.inet_pton(socket.AF_INET6, ip.dst)
        ip_payload = ip.plen - extensions if ip.plen is not None else None
    else:
        return None
    layer = tcp.payload
    if isinstance(layer, scapy_conf.padding_layer):
        data = b""  # link-layer padding, no TCP payload
    else:
        original = getattr(layer, "original", None)
        data = bytes(original if original is not None else layer)
    wire_len = ip_payload - header if ip_payload is not None else len(data)
    wire_len = max(wire_len, 0)
    data = data[:wire_len]
    segment = (
        src,
        tcp.sport,
        dst,
        tcp.dport,
        tcp.seq,
        tcp.ack,
        int(tcp.flags),
        memoryview(data),
        wire_len,
    )
    return segment, data

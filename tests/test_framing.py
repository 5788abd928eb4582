"""The framer on real stream bytes: any split, absurd lengths, resync, missing bytes."""

from __future__ import annotations

import random

import pytest
import worsen

from streamdissect.capture import open_capture, tcp_segment
from streamdissect.protocols.stream.framing import StreamFramer, looks_like_stream
from streamdissect.tcp import FlowTable


def real_streams() -> list[bytes]:
    """Both directions of every connection of a real capture, as reassembled bytes."""
    sinks: list[Recorder] = []

    def new(conn, flags):
        for stream in conn.streams:
            stream.sink = Recorder()
            sinks.append(stream.sink)

    table = FlowTable(lambda *a: None, new)
    for ts, lt, data, _, _ in open_capture(str(worsen.real_capture())):
        if seg := tcp_segment(lt, data):
            table.segment(seg, ts)
    return [b"".join(s.parts) for s in sinks if s.parts]


class Recorder:
    def __init__(self):
        self.parts = []

    def data(self, payload, ts):
        self.parts.append(bytes(payload))

    def missing(self, n, ts):
        raise AssertionError("the real capture has no holes")

    def desync(self):
        pass


class Collect:
    def __init__(self, **options):
        self.frames: list[tuple[int, dict]] = []
        self.anomalies: list[tuple[str, int, int]] = []
        self.framer = StreamFramer(self.emit, self.report, **options)

    def emit(self, offset, ts, record):
        self.frames.append((offset, record.to_dict()))

    def report(self, kind, ts, offset, length, detail):
        self.anomalies.append((kind, offset, length))

    def feed(self, data: bytes, sizes=None) -> Collect:
        pos = 0
        rng = random.Random(7)
        while pos < len(data):
            step = sizes or rng.randint(1, 40)
            self.framer.data(memoryview(data[pos : pos + step]), 0)
            pos += step
        return self


@pytest.fixture(scope="module")
def streams() -> list[bytes]:
    found = real_streams()
    assert found
    return found


def frame_starts(data: bytes) -> list[int]:
    pos, starts = 0, []
    while pos < len(data):
        starts.append(pos)
        pos += 4 + int.from_bytes(data[pos : pos + 4], "big")
    assert pos == len(data)
    return starts


def test_any_split_gives_the_same_frames(streams):
    for data in streams:
        whole = Collect().feed(data, len(data))
        assert [o for o, _ in whole.frames] == frame_starts(data) and not whole.anomalies
        for sizes in (None, 1, 3, 8, 9):
            split = Collect().feed(data, sizes)
            assert split.frames == whole.frames and not split.anomalies


def test_absurd_length_is_malformed_then_resync_without_buffering(streams):
    data = max(streams, key=len)
    starts = frame_starts(data)
    cut = starts[len(starts) // 2]
    bad = b"\xff\xff\xff\xff\x00\x17\x00\x01" + b"junk" * 5
    got = Collect().feed(data[:cut] + bad + data[cut:], 5)
    whole = Collect().feed(data, len(data)).frames
    shifted = [(o if o < cut else o + len(bad), f) for o, f in whole]
    assert got.frames == shifted
    assert got.anomalies == [("frame_too_large", cut, 0xFFFFFFFF), ("resync", cut, len(bad))]
    assert len(got.framer.rbuf) == 0 and got.framer.cur_parts == []


def test_midstream_start_resyncs_on_the_next_frame(streams):
    data = max(streams, key=len)
    starts = frame_starts(data)
    begin = starts[3] + 5  # inside a frame
    c = Collect()
    c.framer.desync()
    c.feed(data[begin:], 16)
    whole = Collect().feed(data, len(data)).frames
    assert c.frames == [(o - begin, f) for o, f in whole if o >= starts[4]]
    assert c.anomalies == [("resync", 0, starts[4] - begin)]


def test_missing_bytes_inside_a_frame_keep_sync(streams):
    data = max(streams, key=len)
    starts = frame_starts(data)
    n = next(i for i in range(len(starts) - 1) if starts[i + 1] - starts[i] > 40)
    a, b = starts[n], starts[n + 1]
    c = Collect()
    c.framer.data(memoryview(data[: a + 20]), 0)
    c.framer.missing(b - a - 20, 0)  # the rest of frame n is missing (snaplen)
    c.framer.data(memoryview(data[b:]), 0)
    whole = Collect().feed(data, len(data)).frames
    assert [o for o, _ in c.frames] == [o for o, _ in whole]
    truncated = [f for o, f in c.frames if f["truncated"]]
    assert len(truncated) == 1 and truncated[0]["key"] == whole[n][1]["key"]
    assert c.anomalies == []


def test_missing_frame_header_loses_sync_and_resyncs(streams):
    data = max(streams, key=len)
    starts = frame_starts(data)
    a, b, c_ = starts[2], starts[3], starts[4]
    col = Collect()
    col.framer.data(memoryview(data[:a]), 0)
    col.framer.missing(b - a + 2, 0)  # frame 2 and the start of frame 3's size field
    col.framer.data(memoryview(data[b + 2 :]), 0)
    offsets = [o for o, _ in col.frames]
    assert offsets[:2] == starts[:2] and offsets[2:] == starts[4:]
    assert [k for k, *_ in col.anomalies] == ["resync"]
    assert col.anomalies[0][1:] == (a, c_ - a)


def test_looks_like_stream(streams):
    client_first = [d for d in streams if d[4:6] == b"\x00\x11"]
    assert client_first and all(looks_like_stream(d[:64]) for d in client_first)
    assert looks_like_stream(b"\x00\x00\x00\x04\x00\x17\x00\x01")
    assert looks_like_stream(b"GET / HTTP/1.1\r\nHost: x\r\n") is False
    assert looks_like_stream(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03") is False
    assert looks_like_stream(b"\x00\x00") is None


def test_malformed_frame_is_reported_and_framing_goes_on(streams):
    data = max(streams, key=len)
    bad = b"\x00\x00\x00\x06\x00\x17\x00\x01\x00\x00"  # a Heartbeat with a body
    c = Collect().feed(bad + data, 7)
    assert c.anomalies[0][0] == "malformed"
    assert len(c.frames) == 1 + len(frame_starts(data))
    assert c.frames[0][1]["malformed"] is True


@pytest.mark.parametrize("keep_limit", [0, 64 * 1024])
def test_small_deliver_is_the_same_record_whole_or_split(streams, keep_limit):
    """A Deliver kept by its head only (`deliver_keep_limit` below its size) is decoded from its
    head whether it came in one piece or several, and a malformed one is reported both ways."""
    import struct

    chunk = struct.pack(">BBHIqQQIIIBHB", 0x50, 0, 1, 1, 1_700_000_000_000, 1, 0, 0, 12, 0,
                        0, 0, 0)  # fmt: skip
    entry = struct.pack(">I", 8) + b"x" * 8

    def deliver(body: bytes) -> bytes:
        return struct.pack(">IHH", 4 + len(body), 0x0008, 1) + body

    good = deliver(b"\x00" + chunk + entry)
    bad_magic = deliver(b"\x00" + b"\x40" + chunk[1:] + entry)
    data = max(streams, key=len)
    for extra in (good, bad_magic):
        whole = Collect(deliver_keep_limit=keep_limit).feed(extra + data, len(extra) + len(data))
        for sizes in (1, 5, 9, 40):
            split = Collect(deliver_keep_limit=keep_limit).feed(extra + data, sizes)
            assert split.frames == whole.frames and split.anomalies == whole.anomalies
        malformed = [a for a in whole.anomalies if a[0] == "malformed"]
        assert malformed == ([("malformed", 0, len(extra))] if extra is bad_magic else [])

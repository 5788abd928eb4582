"""Hostile input through the generated dissector in Debian's tshark: a frame that does not fit
its layout is Wireshark expert info (frame by frame the codec's own verdict: malformed,
unknown or well-formed), never a Lua error; so are the fuzz campaign's findings, made-worse
copies of a real capture (cut, reordered, duplicated, lost packets, a late start) and the
cases of the hostile-input tests."""

from __future__ import annotations

import gzip
import random
import re
import struct
from collections import Counter

import pytest
import tshark_pdml
import worsen
from test_bulk_engine import _frame
from test_fuzz_harness import REGRESSIONS, load
from test_hostile import _deliver_with, nested_lists
from tshark_pdml import connection_capture, pdus

from streamdissect.framing.framer import DEFAULT_MAX_FRAME
from streamdissect.protocols.stream import Malformed, Unknown, decode_frame

fuzz = load()


def whole(frame: bytes) -> bytes | None:
    """The frame with its size field made to fit its bytes (framing is not under test here:
    the codec's verdict on each frame is)."""
    if len(frame) < 8 or len(frame) - 4 > DEFAULT_MAX_FRAME:
        return None
    return struct.pack(">I", len(frame) - 4) + frame[4:]


def codec_verdict(frame: bytes) -> str:
    record = decode_frame(frame)
    return "malformed" if isinstance(record, Malformed) else (
        "unknown" if isinstance(record, Unknown) else "ok")  # fmt: skip


def shown_verdict(pdu: tshark_pdml.Pdu) -> str:
    experts = pdu.experts()
    return "malformed" if "malformed" in experts else "unknown" if "unknown" in experts else "ok"


def two_ways(frames: list[bytes]) -> list[tuple[str, bytes]]:
    return [("c2s" if i % 2 == 0 else "s2c", frame) for i, frame in enumerate(frames)]


def test_bad_frames_are_expert_info_with_the_codecs_verdict(plugin, tmp_path):
    """Crafted frames, corpus frames, 600 mutations of them (the fuzz campaign's mutator) and
    the campaign's frame findings, every fifth split over two segments."""
    rng = random.Random(18)
    seeds = fuzz.crafted_frames(rng) + fuzz.corpus_frames(fuzz.corpus_streams(), per_kind=4)
    mutator = fuzz.FrameMutator(rng, seeds)
    found_before = [p.read_bytes() for p in sorted(REGRESSIONS.glob("frame-*"))]
    candidates = seeds + [mutator.mutate() for _ in range(600)] + found_before
    frames = [f for f in map(whole, candidates) if f is not None]
    capture = connection_capture(tmp_path / "frames.pcap", two_ways(frames), split_every=5)
    trees = pdus(plugin, capture)
    assert len(trees) == len(frames)
    verdicts: Counter = Counter()
    for frame, pdu in zip(frames, trees, strict=True):
        record = decode_frame(frame)
        expected = codec_verdict(frame)
        assert shown_verdict(pdu) == expected, (frame.hex(), pdu.experts())
        assert (pdu.number_of("key"), pdu.number_of("version"), pdu.number_of("size")) == (
            record.key, record.version, record.size)  # fmt: skip
        if expected != "unknown":
            assert pdu.number_of("correlation_id") == record.correlation_id, frame.hex()
            assert pdu.number_of("code") == record.code, frame.hex()
        verdicts[expected] += 1
    assert verdicts["malformed"] >= 100 and verdicts["ok"] >= 100 and verdicts["unknown"] >= 10


@pytest.mark.parametrize(
    "path", sorted(p for p in REGRESSIONS.iterdir() if p.suffix in (".pcap", ".stream")),
    ids=lambda p: p.name,
)  # fmt: skip
def test_fuzz_findings_give_no_lua_error(plugin, tmp_path, path):
    capture = path
    if path.suffix == ".stream":  # one direction's bytes, in segments of 40
        data = path.read_bytes()
        pieces = [("c2s", data[i : i + 40]) for i in range(0, len(data), 40)]
        capture = connection_capture(tmp_path / "stream.pcap", pieces)
    tree = tshark_pdml.run(plugin, capture, "-V", damaged_ok=True)
    assert "RabbitMQ Stream Protocol" in tree or path.suffix == ".pcap"


WORSE = {
    "snaplen-96": lambda packets: worsen.snaplen(packets, 96),
    "snaplen-300": lambda packets: worsen.snaplen(packets, 300),
    "reordered": worsen.reorder,
    "duplicated": worsen.duplicate,
    "lost": lambda packets: worsen.drop(packets, set(worsen.data_segments(packets)[5::7])),
    "late-start": lambda packets: worsen.midstream(packets, len(packets) // 3),
}


@pytest.mark.parametrize("how", WORSE)
def test_made_worse_captures_give_no_lua_error(plugin, tmp_path, how):
    linktype, packets = worsen.read_pcap(worsen.real_capture())
    path = worsen.write_pcap(tmp_path / f"{how}.pcap", linktype, WORSE[how](packets))
    tshark_pdml.run(plugin, path, "-V")
    trees = pdus(plugin, path)
    assert trees
    if how.startswith("snaplen"):
        assert any("truncated" in pdu.experts() for pdu in trees)


def test_the_hostile_tests_cases(plugin, tmp_path):
    """A size of 0xffffffff mid-capture, a chunk header that lies, a zip bomb, AMQP nested
    100,000 deep and u64 ids past 2**63: expert info or exact values, no Lua error."""
    linktype, packets = worsen.read_pcap(worsen.real_capture())
    data = worsen.data_segments(packets)
    n = data[len(data) // 2]
    at = worsen.tcp_of(packets[n][1]).payload_at
    ts, raw, wirelen = packets[n]
    lying = packets[:n] + [(ts, raw[:at] + b"\xff" * 4 + raw[at + 4 :], wirelen)] + packets[n + 1 :]
    path = worsen.write_pcap(tmp_path / "lying.pcap", linktype, lying)
    assert any("not_a_frame" in pdu.experts() for pdu in pdus(plugin, path))

    top = 2**64 - 1
    bomb = gzip.compress(b"\x00" * (8 << 20))
    deep = b"\x00\x53\x77" + nested_lists(100_000)
    chunk = struct.pack(">BBHIqQQIIIBHB", 0x50, 0, 1, 1, 1_700_000_000_000, 1, 0, 0, 12, 0, 0,
                        0, 0)  # fmt: skip
    frames = [
        _deliver_with(struct.pack(">I", 5) + b"hello", records=2**32 - 1),  # records lie
        _deliver_with(struct.pack(">BHII", 0x80 | 1 << 4, 1, 1 << 30, len(bomb)) + bomb),
        _deliver_with(struct.pack(">I", len(deep)) + deep),
        _frame(0x0002, 1, struct.pack(">BiQI", 7, 1, top, 3) + b"abc"),
        _frame(0x0003, 1, struct.pack(">BiQ", 7, 1, top)),
        _frame(0x0008, 2, struct.pack(">BQ", 0, top) + chunk + struct.pack(">I", 8) + b"x" * 8),
    ]
    trees = pdus(plugin, connection_capture(tmp_path / "hostile.pcap", two_ways(frames)))
    assert [shown_verdict(t) for t in trees] == [codec_verdict(f) for f in frames]
    assert shown_verdict(trees[0]) == "malformed"
    assert trees[1].shows("entry.compression") == ["1"] and trees[1].shows("entry.records") == ["1"]
    assert trees[3].shows("publishing_id") == trees[4].shows("publishing_id") == [str(top)]
    assert trees[5].one("committed_chunk_id") == str(top)


def _segments(packets: list, snap: int) -> tuple[dict, list]:
    """Each direction's whole bytes, uncut; each data segment as (packet number, flow, stream
    offset, bytes `snap` keeps of its payload, payload length)."""
    streams: dict = {}
    placed = []
    for number, (_ts, data, _wirelen) in enumerate(packets, 1):
        tcp = worsen.tcp_of(data)
        if tcp is None or not tcp.payload_len:
            continue
        stream = streams.setdefault(tcp.flow, bytearray())
        kept = max(0, min(tcp.payload_len, snap - tcp.payload_at))
        placed.append((number, tcp.flow, len(stream), kept, tcp.payload_len))
        stream += data[tcp.payload_at : tcp.payload_at + tcp.payload_len]
    return streams, placed


def _frame_starts(stream: bytes) -> list[int]:
    at, found = 0, []
    while at + 4 <= len(stream):
        found.append(at)
        at += struct.unpack_from(">I", stream, at)[0] + 4
    return found


def frames_lost_past_the_cut(packets: list, snap: int) -> dict[int, tuple[int, int]]:
    """Packet number -> (byte where the frames past the snap length start, their bytes), for
    each data segment of a clean capture that begins a frame and whose frames start past
    what `snap` keeps of it (the frames before whole up to their size field, so the cut is
    not inside a frame's head). Frame starts are found on each direction's whole byte
    stream, uncut, not segment by segment."""
    streams, placed = _segments(packets, snap)
    starts = {flow: _frame_starts(stream) for flow, stream in streams.items()}
    lost = {}
    for number, flow, offset, kept, length in placed:
        mine = [s - offset for s in starts[flow] if offset <= s < offset + length]
        if kept == length or not mine or mine[0] != 0:
            continue
        past = [s for s in mine if s >= kept]
        if past and all(s + 4 <= kept for s in mine if s < kept):
            lost[number] = (past[0], length - past[0])
    return lost


def starts_known_in_the_cut(packets: list, snap: int) -> set[int]:
    """The data segments that begin at a frame start a reader of the cut capture can know:
    from the direction's first byte (the capture holds the handshake), every frame before
    had its size field within one segment's captured bytes."""
    streams, placed = _segments(packets, snap)
    known = set()
    for flow, stream in streams.items():
        segments = [(offset, kept, number) for number, f, offset, kept, _ in placed if f == flow]
        for start in _frame_starts(stream):
            at = [(offset, kept, n) for offset, kept, n in segments if offset <= start]
            offset, kept, number = at[-1]
            if start == offset:
                known.add(number)
            if start + 4 > offset + kept:  # (its size is not captured: the next is not known)
                break
    return known


NOT_CAPTURED = re.compile(r"^\[Packet size limited during capture: (\d+) bytes from byte "
                          r"(\d+) not captured, the frames in them (possibly )?not shown",
                          re.MULTILINE)  # fmt: skip


def not_captured_said(plugin, cut, two_pass: bool = True) -> dict[int, tuple[int, int, bool]]:
    """Packet number -> (byte, bytes, for certain) of each "not captured" note tshark shows
    for `cut` (not for certain: "possibly not shown")."""
    text = tshark_pdml.run(plugin, cut, "-V", "-o", "rabbitmq_stream.ports:5552,5553",
                           two_pass=two_pass)  # fmt: skip
    said = {}
    for frame in re.split(r"^(?=Frame \d+: )", text, flags=re.MULTILINE)[1:]:
        number = int(frame.split(":", 1)[0].split()[1])
        for length, start, possibly in NOT_CAPTURED.findall(frame):
            said[number] = (int(start), int(length), not possibly)
    return said


@pytest.mark.parametrize("snap", [96, 128])
def test_frames_past_the_snap_length_are_said_as_wireshark_says_a_cut(plugin, tmp_path, snap):
    """A segment cut before some of its frames start: those frames are said not captured, in
    the packet's Info and tree as Wireshark says a packet cut short ("[Packet size limited
    during capture]"), on every shipped capture cut at the snap length, and nowhere else;
    for certain where the segment's first frame start is known from the connection's
    start, "possibly" where it is not."""
    said_somewhere = 0
    for path in worsen.corpus_captures():
        linktype, packets = worsen.read_pcap(path)
        cut = worsen.write_pcap(tmp_path / f"{path.stem}-s{snap}.pcap", linktype,
                                worsen.snaplen(packets, snap))  # fmt: skip
        said = not_captured_said(plugin, cut)
        known = starts_known_in_the_cut(packets, snap)
        lost = frames_lost_past_the_cut(packets, snap)
        assert said == {n: (*where, n in known) for n, where in lost.items()}, path.name
        said_somewhere += len(said)
    assert said_somewhere  # (a cut that lost no frame start would prove nothing)


def test_a_segment_inside_a_frame_is_not_walked_as_frames(plugin, tmp_path):
    """The rest of a large Deliver (its segment starts 32 KiB into the frame) whose message
    bytes there read as a chain of small sizes ending past the snap length: no frame starts
    in that segment, so nothing is said not captured; of seven Heartbeats in one segment cut
    after the sixth's size field, the seventh is (it starts past the cut)."""
    snap, split = 98, 32768  # (connection_capture splits a frame every 32 KiB)
    kept = snap - 54  # (Ethernet, IPv4 and TCP headers)
    chain = (struct.pack(">I", 8) + b"\xa5" * 8) * 3 + struct.pack(">I", 200)  # ends at 240
    head = len(_deliver_with(b"")) + 4  # (the entry's own size field too)
    data = b"\xa5" * (split - head) + chain + b"\xa5" * 1000
    deliver = _deliver_with(struct.pack(">I", len(data)) + data)
    assert deliver[split : split + len(chain)] == chain
    heartbeats = _frame(0x0017, 1, b"") * 7  # (8 bytes each)
    clean = connection_capture(tmp_path / "clean.pcap", [("c2s", heartbeats), ("s2c", deliver)])
    linktype, packets = worsen.read_pcap(clean)
    cut = worsen.write_pcap(tmp_path / "cut.pcap", linktype, worsen.snaplen(packets, snap))
    rest = worsen.tcp_of(packets[4][1])  # (SYN, SYN-ACK, Heartbeats, the Deliver's head)
    assert rest.payload_len > 240 > kept and packets[4][1][rest.payload_at :].startswith(chain)
    truth = frames_lost_past_the_cut(packets, snap)
    assert truth == {3: (48, 8)} and starts_known_in_the_cut(packets, snap) >= {3}
    assert not_captured_said(plugin, cut) == {3: (48, 8, True)}


FAKE_HEADERS = _frame(0x0017, 1, b"") + struct.pack(">IHH", 100, 0x0002, 1)  # Heartbeat, Publish


def deliver_over_two_segments(tmp_path, tail: int, after: bytes = b"") -> tuple:
    """A clean capture of one connection (SYN, SYN-ACK, a Heartbeat, a Deliver, a Heartbeat)
    whose Deliver's message body holds, just where its second segment (packet 5) starts,
    what reads as a Heartbeat and a Publish header (FAKE_HEADERS), then `tail` more body
    bytes; `after`: frames sent in the same segment, after the Deliver. (path, packets)"""
    split = 32768  # (connection_capture splits a frame every 32 KiB)
    head = len(_deliver_with(b"")) + 4  # (the entry's own size field too)
    data = b"\xa5" * (split - head) + FAKE_HEADERS + b"\xa5" * tail
    deliver = _deliver_with(struct.pack(">I", len(data)) + data)
    assert deliver[split : split + len(FAKE_HEADERS)] == FAKE_HEADERS
    heartbeat = _frame(0x0017, 1, b"")
    clean = connection_capture(tmp_path / "clean.pcap",
                               [("c2s", heartbeat), ("s2c", deliver + after), ("c2s", heartbeat)])  # fmt: skip
    _linktype, packets = worsen.read_pcap(clean)
    rest = worsen.tcp_of(packets[4][1])  # (SYN, SYN-ACK, Heartbeat, the Deliver's head)
    assert packets[4][1][rest.payload_at :].startswith(FAKE_HEADERS)
    assert rest.payload_len == len(FAKE_HEADERS) + tail + len(after)
    return clean, packets


def editcap_snap(src, dst, snap: int):
    import subprocess

    subprocess.run(["editcap", "-s", str(snap), str(src), str(dst)], check=True, capture_output=True)
    return dst


def test_frame_headers_inside_a_message_body_are_not_taken_for_frames(plugin, tmp_path):
    """A Deliver's message body that holds, just where its second segment starts, what reads
    as a Heartbeat and a Publish header, the Publish's size reaching past the snap length
    (`editcap -s`): with the handshake in the capture, the walk from the first frame knows
    that segment lies inside the Deliver, so nothing is said not captured, in one pass or
    two; without it, where frames start is not known, and the note says "possibly"."""
    clean, packets = deliver_over_two_segments(tmp_path, tail=1000)
    linktype = worsen.read_pcap(clean)[0]
    no_handshake = worsen.write_pcap(tmp_path / "late.pcap", linktype, packets[2:])
    cut = editcap_snap(clean, tmp_path / "cut.pcap", 98)
    late_cut = editcap_snap(no_handshake, tmp_path / "late-cut.pcap", 98)
    assert frames_lost_past_the_cut(packets, 98) == {}  # (no frame starts in that segment)
    assert not_captured_said(plugin, cut) == not_captured_said(plugin, cut, two_pass=False) == {}
    # the same bytes, read from byte 0 without knowing: the fake Publish would end at 112
    assert not_captured_said(plugin, late_cut) == {3: (112, 1016 - 112, False)}


def shown(plugin, capture, *options: str, two_pass: bool = True) -> dict[int, tuple[str, list]]:
    """Packet number -> (its Info column, the commands of the frames shown in it)."""
    text = tshark_pdml.run(plugin, capture, "-T", "fields", "-E", "aggregator=|", "-e",
                           "frame.number", "-e", "_ws.col.Info", "-e", "rabbitmq_stream.command",
                           *options, two_pass=two_pass)  # fmt: skip
    rows = (line.split("\t") for line in text.splitlines())
    return {int(number): (info, commands.split("|") if commands else [])
            for number, info, commands in rows}  # fmt: skip


@pytest.mark.parametrize("two_pass", [True, False], ids=["two-pass", "one-pass"])
def test_a_cut_segment_inside_a_frame_is_shown_as_its_continuation(plugin, tmp_path, two_pass):
    """The Deliver's second segment, cut by `editcap -s 98` (TCP cannot join a cut segment
    to the frame it continues, so it hands it over on its own): its first bytes look like a
    Heartbeat and a Publish header, but the walk from the handshake knows they are the
    Deliver's. They are shown as the Deliver's continuation, as Wireshark's dissectors show
    continuation data, not as frames; real frames after the Deliver in the same segment are
    shown from where they start, and one past the cut is said not captured. The uncut
    capture is TCP's to reassemble, as before."""
    whole, _ = deliver_over_two_segments(tmp_path, tail=1000)
    cut = editcap_snap(whole, tmp_path / "inside.pcap", 98)
    heartbeat = _frame(0x0017, 1, b"")
    (tmp_path / "after").mkdir()
    then, _ = deliver_over_two_segments(tmp_path / "after", tail=20, after=heartbeat * 2)
    then_cut = editcap_snap(then, tmp_path / "after-cut.pcap", 98)  # (keeps 44 payload bytes)
    expected = {3: ("Heartbeat", ["Heartbeat"]), 4: ("Deliver subscription_id=1 [truncated]",
                ["Deliver"]), 6: ("Heartbeat", ["Heartbeat"])}  # fmt: skip
    assert shown(plugin, cut, two_pass=two_pass) == {
        **expected, 1: ("40000 → 5552 [SYN] Seq=0 Win=65535 Len=0", []),
        2: ("5552 → 40000 [SYN, ACK] Seq=0 Ack=1 Win=65535 Len=0", []),
        5: ("[Continuation of Deliver frame]", [])}  # fmt: skip
    tree = tshark_pdml.run(plugin, cut, "-V", "-Y", "frame.number == 5", two_pass=two_pass)
    assert "[Continuation of Deliver frame from packet 4, 1016 bytes]" in tree
    # the continuation's 36 bytes, a Heartbeat whole, a Heartbeat past the cut at 44
    shown_after = shown(plugin, then_cut, two_pass=two_pass)
    info = "[Continuation of Deliver frame], Heartbeat [Packet size limited during capture]"
    assert shown_after[5] == (info, ["Heartbeat"])
    assert not_captured_said(plugin, then_cut, two_pass=two_pass) == {5: (44, 8, True)}
    for capture in (cut, then_cut):  # (a display filter sees no frame that is not there)
        publish = shown(plugin, capture, "-Y", 'rabbitmq_stream.command == "Publish"',
                        two_pass=two_pass)  # fmt: skip
        assert publish == {}
    reassembled = ("Deliver subscription_id=1 record_count=1", ["Deliver"])
    assert shown(plugin, whole, two_pass=two_pass)[5] == reassembled

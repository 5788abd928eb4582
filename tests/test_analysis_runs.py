"""Every table of analyze() made from the bulk engine's HotFrames (each collector's on_hot:
a run of hot frames at a time) equals the one made from records by the streaming engine,
row for row: here on publish/confirm ledgers that are (and are not) the
usual ascending case; test_columns_report.py runs assert_same_tables on the corpus, its
made-worse copies and the fuzz findings."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import worsen
from test_bulk_engine import _frame

from streamdissect.analysis.driver import analyze_events
from streamdissect.engine.dissect import Dissector
from streamdissect.framing.framer import DELIVER_KEEP_LIMIT
from streamdissect.protocols.stream.analysis import hot_input
from streamdissect.protocols.stream.analysis.confirms import ConfirmCollector
from streamdissect.protocols.stream.hot import HotFrames
from streamdissect.tables import schema

TABLES = list(schema.analysis_tables())


def tables(path: Path, engine: str, columns: bool, report_only: bool = False) -> dict:
    options = {"publish_messages": False, "helper_process": False,
               "deliver_keep_limit": 0 if report_only else DELIVER_KEEP_LIMIT}  # fmt: skip
    dissector = Dissector(ports=(5552, 5553), engine=engine, columns=columns, **options)
    events = list(dissector.run(str(path)))
    result = analyze_events(iter(events), report_only=report_only,
                            tcp_connections_after=lambda: list(dissector.connections))  # fmt: skip
    out = {name: list(result.rows(name)) for name in TABLES}
    out["credit"] = result.credit_rows()
    out["span"] = (result.first_ns, result.last_ns)
    return out


def assert_same_tables(path: Path) -> None:
    """Both ways of feeding a run (over columns, and frame by frame when it is short)."""
    for report_only in (False, True):
        reference = tables(path, "stream", columns=False, report_only=report_only)
        for short_run in (0, hot_input.SHORT_RUN, 1 << 30):
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(hot_input, "SHORT_RUN", short_run)
                got = tables(path, "bulk", columns=True, report_only=report_only)
            for name in reference:
                assert got[name] == reference[name], (name, report_only, short_run)


def _publish(pid: int, ids: list[int]) -> bytes:
    messages = b"".join(struct.pack(">QI", i, 20) + b"x" * 20 for i in ids)
    return _frame(0x0002, 1, struct.pack(">Bi", pid, len(ids)) + messages)


def _confirm(pid: int, ids: list[int]) -> bytes:
    return _frame(0x0003, 1, struct.pack(f">Bi{len(ids)}Q", pid, len(ids), *ids))


def _packet(client_to_server: bool, seq: int, ack: int, flags: int, payload: bytes) -> bytes:
    ends = [(bytes([127, 0, 0, 1]), 40000), (bytes([127, 0, 0, 2]), 5552)]
    (src, sport), (dst, dport) = ends if client_to_server else ends[::-1]
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq, ack, 0x50, flags, 65535, 0, 0)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0x4000, 64, 6,
                     0, src, dst)  # fmt: skip
    return b"\x00" * 12 + b"\x08\x00" + ip + tcp + payload


def ledger_capture(path: Path, frames: list[bytes]) -> Path:
    """One connection: each Publish from the client, each PublishConfirm from the server, a
    segment each, in the given order."""
    ts = 1_700_000_000 * 10**9
    packets = [(ts, _packet(True, 999, 0, 0x02, b""), 54),
               (ts + 1000, _packet(False, 4999, 1000, 0x12, b""), 54)]  # fmt: skip
    seq = [1000, 5000]
    for frame in frames:
        side = 0 if frame[4:6] == b"\x00\x02" else 1
        data = _packet(side == 0, seq[side], seq[1 - side], 0x18, frame)
        packets.append((ts + 2000 + 1000 * len(packets), data, len(data)))
        seq[side] += len(frame)
    return worsen.write_pcap(path, 1, packets)


LEDGERS = {
    # the usual case: ascending ids, confirmed from the front, two publishers interleaved
    "ascending": [_publish(1, [1, 2]), _publish(2, [10]), _publish(1, [3]), _confirm(1, [1]),
                  _publish(1, [4, 5]), _confirm(2, [10]), _confirm(1, [2, 3]),
                  _publish(2, [11, 12]), _confirm(1, [4]), _confirm(2, [11])],
    # a resend, a confirm before its publish, an unknown id, ids going down, u64 edges
    "irregular": [_publish(1, [1, 2, 3]), _publish(1, [3, 4]), _confirm(1, [6]),
                  _publish(1, [6, 5]), _confirm(1, [1, 2]), _confirm(1, [99]),
                  _publish(1, [2**64 - 2, 2**64 - 1]), _confirm(1, [2**64 - 1]),
                  _confirm(1, [4, 3])],
    # confirms skipping the oldest id (out of the front), then back to the usual case
    "skipping": [_publish(3, [1]), _publish(3, [2]), _publish(3, [3]), _confirm(3, [2]),
                 _confirm(3, [1, 3]), _publish(3, [4]), _publish(3, [5]), _confirm(3, [4, 5])],
}  # fmt: skip


def ledgers_at_once(monkeypatch) -> list[bool]:
    """Whether each call of ConfirmCollector._ledger_at_once took its ledger over columns
    (every run over columns, however short)."""
    at_once: list[bool] = []
    monkeypatch.setattr(hot_input, "SHORT_RUN", 0)
    real = ConfirmCollector._ledger_at_once

    def spy(*args):
        result = real(*args)
        at_once.append(result is not None)
        return result

    monkeypatch.setattr(ConfirmCollector, "_ledger_at_once", spy)
    return at_once


@pytest.mark.parametrize("name", sorted(LEDGERS))
def test_ledgers_tables_same(tmp_path, name, monkeypatch):
    at_once = ledgers_at_once(monkeypatch)
    path = ledger_capture(tmp_path / f"{name}.pcap", LEDGERS[name])
    assert any(ev.__class__ is HotFrames for ev in Dissector(columns=True).run(str(path)))
    assert_same_tables(path)
    if name == "ascending":
        assert at_once and all(at_once)  # (the usual case never goes one by one)
    else:
        assert not all(at_once)  # (and an irregular one does)


def mss_capture(path: Path, frames: list[bytes], mss: int = 1448) -> Path:
    """ledger_capture with each direction's bytes cut into `mss`-byte segments, as a NIC
    cuts them: big frames cross segments, and their messages are cut by the boundaries."""
    ts = 1_700_000_000 * 10**9
    packets = [(ts, _packet(True, 999, 0, 0x02, b""), 54),
               (ts + 1000, _packet(False, 4999, 1000, 0x12, b""), 54)]  # fmt: skip
    streams = [b"".join(f for f in frames if f[4:6] == b"\\x00\\x02"),
               b"".join(f for f in frames if f[4:6] != b"\\x00\\x02")]
    seq = [1000, 5000]
    for at in range(0, max(map(len, streams)), mss):
        for side in (0, 1):
            piece = streams[side][at : at + mss]
            if piece:
                data = _packet(side == 0, seq[side], seq[1 - side], 0x18, piece)
                packets.append((ts + 2000 + 1000 * len(packets), data, len(data)))
                seq[side] += len(piece)
    return worsen.write_pcap(path, 1, packets)


def test_big_publishes_across_segments_tables_same(tmp_path):
    """Publish frames of many messages cut into MSS-sized segments (their ids read where they
    are, a message cut by a boundary copied), odd big ones among them (another entry size in
    the middle, a v2 frame), and the confirms: every table and the frame rows are the
    reference's."""
    from test_frame_batches import columnar, reference

    def publish(pid, ids, size=100, version=1, odd_at=None):
        body = b"".join(struct.pack(">QI", i, size + (i == odd_at)) + b"m" * (size + (i == odd_at))
                        for i in ids)  # fmt: skip
        head = struct.pack(">Bi", pid, len(ids))
        return _frame(0x0002, version, head + (b"\\x00\\x00" if version == 2 else b"") + body)

    frames = [publish(1, range(k * 50, k * 50 + 50)) for k in range(12)]
    frames += [publish(1, range(600, 650), odd_at=620), publish(1, range(650, 700), size=33)]
    frames += [_confirm(1, list(range(k * 100, k * 100 + 100))) for k in range(7)]
    path = mss_capture(tmp_path / "big.pcap", frames)
    runs_seen = [ev for ev in Dissector(columns=True, publish_messages=False).run(str(path))
                 if ev.__class__ is HotFrames]
    assert sum(map(len, runs_seen)) >= 12
    assert_same_tables(path)
    assert columnar(path) == reference(path)

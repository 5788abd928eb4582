"""The analyze report made from hot frames as columns (HotFrames, each collector's on_hot) is the report
made from records by the streaming engine, byte for byte, and so are analyze()'s tables: on
the corpus, on made-worse copies, on odd hot frames (other versions, wrong lengths,
impossible counts) and on the fuzz findings."""

from __future__ import annotations

from pathlib import Path

import pytest
import worsen
from test_analysis_runs import assert_same_tables, ledgers_at_once
from test_bulk_engine import REGRESSIONS, WORSE, _frame, frames_capture

from streamdissect.analysis.driver import analyze_events
from streamdissect.capture import blocks
from streamdissect.cli._text_report import json_write, to_json
from streamdissect.engine import bulk
from streamdissect.engine.dissect import Dissector
from streamdissect.protocols.stream.analysis import hot_input

OPTIONS = {"publish_messages": False, "deliver_keep_limit": 0}


MODES = {"records": {}, "columns": {"columns": True}}


def report(path: Path, engine: str, mode: str, helper: bool = False) -> str:
    dissector = Dissector(engine=engine, helper_process=helper, **MODES[mode], **OPTIONS)
    result = analyze_events(dissector.run(str(path)), report_only=True,
                            tcp_connections_after=lambda: list(dissector.connections))  # fmt: skip
    parts: list[str] = []
    json_write(to_json(result, lazy=True), parts.append)
    return "".join(parts)


def assert_same_report(path: Path, helper: bool = False) -> None:
    reference = report(path, "stream", "records")
    for block in (blocks.BLOCK, 9_000):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(blocks, "BLOCK", block)
            assert report(path, "bulk", "columns") == reference, block
            # (every run over columns, however short)
            patch.setattr(hot_input, "SHORT_RUN", 0)
            assert report(path, "bulk", "columns") == reference, (block, "short runs")
            patch.undo()
            patch.setattr(blocks, "BLOCK", block)
            if helper and block < path.stat().st_size:  # (the helper reads more)
                patch.setattr(bulk, "can_fork", lambda: True)
                assert report(path, "bulk", "columns", helper=True) == reference, "helper"


@pytest.mark.parametrize("path", worsen.corpus_captures(), ids=lambda p: p.stem)
def test_corpus_report_same(path):
    assert_same_report(path, helper=True)
    assert_same_tables(path)


def run_kinds(path: Path) -> set[int]:
    from streamdissect.protocols.stream.hot import HotFrames

    return {int(k) for ev in Dissector(engine="bulk", columns=True, **OPTIONS).run(str(path))
            if ev.__class__ is HotFrames for k in ev.key}  # fmt: skip


def test_runs_are_made():
    kinds = set()
    for path in worsen.corpus_captures():
        kinds |= run_kinds(path)
    assert kinds == {0x0002, 0x0003, 0x0008, 0x0009, 0x0017}


def test_the_ledger_takes_ascending_ids_at_once(monkeypatch):
    """On a real capture of publishes and confirms, the confirm ledger applies whole runs
    over columns (not one frame at a time), and the report is still the reference's."""
    at_once = ledgers_at_once(monkeypatch)
    path = worsen.CAPTURES / "rstream-publish-confirm-3.10.pcap"
    assert report(path, "bulk", "columns") == report(path, "stream", "records")
    assert at_once and all(at_once)


@pytest.mark.parametrize("name", sorted(WORSE))
def test_worsened_report_same(tmp_path, name):
    linktype, packets = worsen.read_pcap(worsen.real_capture())
    path = worsen.write_pcap(tmp_path / "w.pcap", linktype, WORSE[name](packets))
    assert_same_report(path)
    assert_same_tables(path)


@pytest.mark.parametrize("path", REGRESSIONS, ids=lambda p: p.name)
def test_fuzz_findings_report_same(path):
    assert_same_report(path)
    assert_same_tables(path)


def test_odd_hot_frames_report_same(tmp_path):
    """Well-formed ones become hot frames as columns, odd ones records (and malformed
    reports)."""
    import struct

    # an Osiris chunk header (facts §3): one entry of one record, 12 data bytes
    chunk = struct.pack(">BBHIqQQIIIBHB", 0x50, 0, 1, 1, 1_700_000_000_000, 1, 0, 0, 12, 0,
                        0, 0, 0)  # fmt: skip
    entry = struct.pack(">I", 8) + b"x" * 8  # one simple entry: size, then its bytes
    frames = [
        _frame(0x0017, 1, b""), _frame(0x0017, 2, b""), _frame(0x0017, 1, b"\x00\x01"),
        _frame(0x0009, 1, struct.pack(">Bh", 3, 10)), _frame(0x0009, 1, struct.pack(">Bh", 3, -2)),
        _frame(0x0009, 1, struct.pack(">Bhx", 3, 10)), _frame(0x0009, 2, struct.pack(">Bh", 3, 10)),
        _frame(0x0009, 1, struct.pack(">Bh", 3, 0)),
        _frame(0x0003, 1, struct.pack(">Bi3Q", 1, 3, 7, 8, 9)),
        _frame(0x0003, 1, struct.pack(">Bi", 1, -1)), _frame(0x0003, 2, struct.pack(">BiQ", 1, 1, 7)),
        _frame(0x0008, 1, struct.pack(">B", 0) + chunk + entry),
        _frame(0x0008, 2, struct.pack(">BQ", 0, 5) + chunk + entry),
        _frame(0x0008, 1, struct.pack(">B", 0) + b"\x40" + chunk[1:] + entry),  # bad magic
        _frame(0x0008, 3, struct.pack(">B", 0) + chunk + entry),  # unknown version
        _frame(0x0008, 1, struct.pack(">B", 0) + chunk[:30]),  # shorter than a chunk header
        _frame(0x0008, 2, struct.pack(">BQ", 0, 5) + chunk[:40]),
        # impossible counts: 5 entries in 12 bytes; 70,000 records in one entry
        _frame(0x0008, 1, struct.pack(">B", 0) + chunk[:2] + struct.pack(">H", 5) + chunk[4:]
               + entry),
        _frame(0x0008, 1, struct.pack(">B", 0) + chunk[:4] + struct.pack(">I", 70_000)
               + chunk[8:] + entry),
        # a head longer than the first segment of the frame (300 bytes of data)
        _frame(0x0008, 1, struct.pack(">B", 0) + chunk[:36] + struct.pack(">I", 300)
               + chunk[40:] + struct.pack(">I", 296) + b"y" * 296),
        _frame(0x0003, 1, struct.pack(">Bi", 1, 0)),  # no ids
        _frame(0x0003, 1, struct.pack(">Bi2Q", 1, 2, 2**64 - 1, 0)),  # ids through 2**64
        # Publish: well-formed, v2, no messages, a count that does not fit, a sub-batch entry,
        # shorter than a message head, and messages of two sizes
        _frame(0x0002, 1, struct.pack(">BiQI", 7, 1, 5, 3) + b"abc"),
        _frame(0x0002, 2, struct.pack(">BiQhI", 7, 1, 5, -1, 3) + b"abc"),
        _frame(0x0002, 1, struct.pack(">Bi", 7, 0)),
        _frame(0x0002, 1, struct.pack(">BiQI", 7, 2, 5, 3) + b"abc"),
        _frame(0x0002, 1, struct.pack(">BiQBHII", 7, 1, 5, 0x80, 1, 3, 3) + b"abc"),
        _frame(0x0002, 1, struct.pack(">BiQ", 7, 1, 5)),
        _frame(0x0002, 1, struct.pack(">BiQI", 7, 2, 5, 3) + b"abc" + struct.pack(">QI", 6, 4)
               + b"abcd"),
    ]  # fmt: skip
    path = frames_capture(tmp_path / "odd.pcap", frames)
    assert run_kinds(path) == {0x0002, 0x0003, 0x0008, 0x0009, 0x0017}
    assert_same_report(path)


def test_publishes_and_confirms_report_same(tmp_path):
    """Publish ids going up one by one (ranges), out of order, repeated, going down; confirms
    of them, of some twice and of unknown ids: the confirm ledger's runs and its general
    path, from hot frames as columns and from records."""
    import struct

    def publish(ids: list[int]) -> bytes:
        messages = b"".join(struct.pack(">QI", i, 20) + b"x" * 20 for i in ids)
        return _frame(0x0002, 1, struct.pack(">Bi", 7, len(ids)) + messages)

    def confirm(ids: list[int]) -> bytes:
        return _frame(0x0003, 1, struct.pack(f">Bi{len(ids)}Q", 7, len(ids), *ids))

    # (ids are u64: 2**64 - 1 then 0 is no step of one)
    groups = ([1, 2, 3], [4], [6, 5, 7], [8, 8, 9], [12, 11, 10], [13, 14, 15, 16],
              [2**64 - 2, 2**64 - 1, 0])  # fmt: skip
    frames = [publish(ids) for ids in groups]
    frames += [confirm([1, 2]), confirm([3, 4]), confirm([5, 6, 7]), confirm([9, 8]),
               confirm([99]), confirm([13, 14, 15, 16]), confirm([13]), confirm([0]),
               confirm([2**64 - 2, 2**64 - 1]), confirm([2**64 - 1, 0])]  # fmt: skip
    path = frames_capture(tmp_path / "publish.pcap", frames)
    assert {0x0002, 0x0003} <= run_kinds(path)
    assert_same_report(path)


def test_linux_cooked_capture_report_same(tmp_path):
    """tcpdump -i any writes Linux cooked (SLL) packets: parsed as columns as well."""
    _, packets = worsen.read_pcap(worsen.real_capture())
    sll = [(ts, worsen.as_linux_sll(d), n + 2) for ts, d, n in packets]
    assert_same_report(worsen.write_pcap(tmp_path / "sll.pcap", 113, sll))


def test_ipv6_capture_report_same(tmp_path):
    """IPv6 + TCP packets parsed as columns: the same report as from records."""
    _, packets = worsen.read_pcap(worsen.real_capture())
    v6 = [(ts, data, n + len(data) - len(d)) for ts, d, n in packets
          for data in (worsen.as_ipv6(d, extensions=()),)]  # fmt: skip
    assert_same_report(worsen.write_pcap(tmp_path / "v6.pcap", 1, v6), helper=True)

"""Every input form goes through the bulk engine and gives exactly the reference's output.

The reference is the streaming engine (engine.stream, packet by packet); the forms are a
plain pcap, pcapng, gzip of either, a rotated set of pieces, and a pipe (what standard input
and a live capture are). For each shipped capture and the made-worse copies, the events,
the anomalies table and the connections table are compared whole, with blocks small enough
that records, frames and pcapng blocks straddle them, with and without the helper process.
pcapng files are written by tests/worsen.py (no editcap), so odd ones can be made: several
interfaces of other link types and time resolutions, simple and obsolete packet blocks,
options, a second section in the other byte order, damaged and cut blocks.
"""

from __future__ import annotations

import io
import os
import struct
import subprocess
from pathlib import Path

import pytest
import worsen
from test_bulk_engine import WORSE, outcome_of

from streamdissect.analysis.driver import analyze_events
from streamdissect.capture import blocks, packet_columns, pcapng_walk
from streamdissect.cli._text_report import json_write, to_json
from streamdissect.cli.frames import jsonl_writer
from streamdissect.engine import bulk
from streamdissect.engine.dissect import Dissector

# every test both ways: the compiled walk and the Python one (native_modes)
pytestmark = pytest.mark.usefixtures("walk_mode")

SMALL_BLOCK = 9_000


def outcome(paths: list, engine: str, **options) -> tuple[list, list, list, bool]:
    """(events, anomalies table, connections table, whether the bulk engine read it)."""
    dissector = Dissector(engine=engine, **options)
    return (*outcome_of(dissector, paths), dissector._bulk)


def assert_same(paths: list, reference: tuple | None = None, **options) -> tuple:
    """The bulk engine (default and small blocks, in this process and with the helper)
    gives the reference's events and tables; the reference's outcome."""
    reference = reference or outcome(paths, "stream", **options)
    assert reference[0], "nothing to compare"
    for block, helper in ((blocks.BLOCK, False), (SMALL_BLOCK, False), (SMALL_BLOCK, True)):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(blocks, "BLOCK", block)
            patch.setattr(bulk, "can_fork", lambda: True)
            got = outcome(paths, "bulk", helper_process=helper, **options)
        assert got[3], "the bulk engine did not read it"
        for name, ref, new in zip(("events", "anomalies", "connections"), reference, got):
            assert len(new) == len(ref), (name, block, helper)
            for i, (a, b) in enumerate(zip(ref, new)):
                assert a == b, (name, block, helper, i)
    return reference


def _pcapng_of(path: Path, folder: Path) -> Path:
    linktype, packets = worsen.read_pcap(path)
    return worsen.write_pcapng(folder / f"{path.stem}.pcapng", packets,
                               interfaces=[worsen.Interface(linktype, 9)])  # fmt: skip


FORMS = {
    "pcapng": lambda p, d: [_pcapng_of(p, d)],
    "gzip": lambda p, d: [worsen.gzip_copy(p, d / f"{p.stem}.pcap.gz")],
    "pcapng-gzip": lambda p, d: [worsen.gzip_copy(_pcapng_of(p, d), d / f"{p.stem}.pcapng.gz")],
    "pieces": lambda p, d: worsen.pieces(p, d, 4),
}


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("path", worsen.corpus_captures(), ids=lambda p: p.stem)
def test_corpus_in_every_form_same_as_stream(path, form, tmp_path):
    """Each shipped capture: the form's output through the bulk engine equals the reference
    on the form, which equals the reference on the plain pcap (the form lost nothing)."""
    paths = FORMS[form](path, tmp_path)
    plain = outcome([path], "stream")
    reference = assert_same(paths)
    assert reference[0] == plain[0] and reference[2] == plain[2]


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("name", sorted(WORSE))
def test_worsened_in_every_form_same_as_stream(name, form, tmp_path):
    linktype, packets = worsen.read_pcap(worsen.real_capture())
    path = worsen.write_pcap(tmp_path / "w.pcap", linktype, WORSE[name](packets))
    paths = FORMS[form](path, tmp_path)
    assert_same(paths, publish_messages=False, deliver_keep_limit=0)
    assert _report_and_lines(paths, "auto") == _report_and_lines([path], "stream")


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("path", worsen.corpus_captures(), ids=lambda p: p.stem)
def test_snaplen_cut_corpus_in_every_form_same_as_stream(path, form, tmp_path):
    """Each shipped capture cut at 96 bytes (tcpdump -s 96), in each form: the bulk engine
    gives the reference's events and anomalies, and the report and jsonl from columns are
    those from records on the plain cut pcap."""
    linktype, packets = worsen.read_pcap(path)
    cut = worsen.write_pcap(tmp_path / "cut.pcap", linktype, worsen.snaplen(packets, 96))
    paths = FORMS[form](cut, tmp_path)
    assert_same(paths, publish_messages=False, deliver_keep_limit=0)
    assert _report_and_lines(paths, "auto") == _report_and_lines([cut], "stream")


def _report_and_lines(paths: list, engine: str) -> tuple[str, str]:
    """The analyze report's JSON and the frames jsonl: from the hot frames as columns (the
    bulk engine, as the CLI makes them) or from records (engine="stream")."""
    bulk_engine = engine != "stream"
    dissector = Dissector(engine=engine, columns=bulk_engine, publish_messages=False,
                          deliver_keep_limit=0)  # fmt: skip
    result = analyze_events(dissector.run([str(p) for p in paths]), report_only=True,
                            tcp_connections_after=lambda: list(dissector.connections),
                            protocol_of=dissector.protocol_of.get)  # fmt: skip
    parts: list[str] = []
    json_write(to_json(result, lazy=True), parts.append)
    out = io.StringIO()
    lines = Dissector(engine=engine, columns="lines" if bulk_engine else False,
                      publish_messages=False)  # fmt: skip
    write = jsonl_writer(out, False, False, lines.protocol_of.get)
    for event in lines.run([str(p) for p in _again(paths)]):
        write(event)
    return "".join(parts), out.getvalue()


def _again(paths: list) -> list:
    """The paths to read a second time (a FIFO's: a new FIFO with the same bytes)."""
    return [FIFO_SOURCES.pop(p, p) for p in paths]


FIFO_SOURCES: dict = {}  # a FIFO made by _fifo_form -> a FIFO with the same bytes, not yet read


def _fifo_form(path: Path, folder: Path) -> list[Path]:
    first, second = (_through_fifo(path, folder, f"{path.stem}-{k}.fifo") for k in (1, 2))
    FIFO_SOURCES[first] = second
    return [first]


@pytest.mark.parametrize("form", [*sorted(FORMS), "pipe"])
@pytest.mark.parametrize("path", worsen.corpus_captures(), ids=lambda p: p.stem)
def test_reports_and_lines_from_columns_in_every_form(path, form, tmp_path):
    """What users see, made from the hot frames as columns on each form, is what records
    give on the plain pcap: the analyze report byte for byte, the frames jsonl line for
    line."""
    paths = _fifo_form(path, tmp_path) if form == "pipe" else FORMS[form](path, tmp_path)
    got = _report_and_lines(paths, "auto")
    for feeder in FEEDERS:
        assert feeder.wait(timeout=60) == 0
    FEEDERS.clear()
    assert got == _report_and_lines([path], "stream")


def test_pcapng_packets_are_walked_in_place(tmp_path, monkeypatch):
    """The enhanced packet blocks of an ordinary pcapng file are read in place: only the
    section and interface blocks go through the reference reader's code."""
    taken = []
    real = pcapng_walk.PcapngWalk._take
    monkeypatch.setattr(pcapng_walk.PcapngWalk, "_take",
                        lambda self, kind, *a: taken.append(kind) or real(self, kind, *a))
    path = _pcapng_of(worsen.real_capture(), tmp_path)
    assert_same([path])
    assert taken and set(taken) == {0x0A0D0D0A, 1}


# --- odd pcapng files --------------------------------------------------------------------


def _sll(packet: worsen.Packet) -> worsen.Packet:
    ts, data, wirelen = packet
    made = worsen.as_linux_sll(data)
    return ts, made, wirelen + len(made) - len(data)


PCAPNG_CASES = {
    # two Ethernet interfaces of other time resolutions, packets alternating
    "two-interfaces": ([worsen.Interface(1, 6), worsen.Interface(1, 9)],
                       lambda k: (k % 2, "epb"), None),
    # Ethernet and Linux cooked interfaces alternating: the layout changes all the time
    "two-link-types": ([worsen.Interface(1, 9), worsen.Interface(113, 6)],
                       lambda k: (k % 2, "epb"), lambda k: k % 2),
    # long runs on each of two link types
    "link-type-runs": ([worsen.Interface(1, 9), worsen.Interface(113, 9)],
                       lambda k: ((k // 200) % 2, "epb"), lambda k: (k // 200) % 2),
    # 2^-20 s and 10^-12 s: times the columns cannot convert, read the exact way
    "binary-resolution": ([worsen.Interface(1, 0x94)], lambda k: (0, "epb"), None),
    "picoseconds": ([worsen.Interface(1, 12, 1_795_000_000)], lambda k: (0, "epb"), None),
    "time-offset": ([worsen.Interface(1, 6, 1_000)], lambda k: (0, "epb"), None),
    "simple-blocks": ([worsen.Interface(1, 9)], lambda k: (0, "spb" if k % 7 == 3 else "epb"),
                      None),
    "obsolete-blocks": ([worsen.Interface(1, 9)], lambda k: (0, "opb" if k % 5 == 1 else "epb"),
                        None),
}  # fmt: skip


def _odd_pcapng(name: str, path: Path, big_endian: bool = False) -> Path:
    interfaces, choose, sll = PCAPNG_CASES[name]
    _, packets = worsen.read_pcap(worsen.real_capture())
    if sll is not None:
        packets = [_sll(p) if sll(k) else p for k, p in enumerate(packets)]
    return worsen.write_pcapng(path, packets, interfaces=interfaces, choose=choose,
                               big_endian=big_endian)  # fmt: skip


@pytest.mark.parametrize("big_endian", [False, True], ids=["le", "be"])
@pytest.mark.parametrize("name", sorted(PCAPNG_CASES))
def test_odd_pcapng_same_as_stream(name, big_endian, tmp_path):
    assert_same([_odd_pcapng(name, tmp_path / "odd.pcapng", big_endian)])


def test_sections_of_either_byte_order_in_one_file(tmp_path):
    _, packets = worsen.read_pcap(worsen.real_capture())
    half = len(packets) // 2
    first = worsen.pcapng_bytes(packets[:half], interfaces=[worsen.Interface(1, 9)])
    second = worsen.pcapng_bytes(packets[half:], interfaces=[worsen.Interface(1, 6)],
                                 big_endian=True)  # fmt: skip
    path = tmp_path / "sections.pcapng"
    path.write_bytes(first + second)
    assert_same([path])


def test_big_and_damaged_blocks_same_as_stream(tmp_path):
    """A name-resolution block larger than a read (gathered on the side), a packet block
    over the cap (passed over), an EPB on an undeclared interface, one whose captured length
    runs past its block, one timed before 1970 by its interface's offset: each reported
    or read as the reference does, and the walk goes on."""
    _, packets = worsen.read_pcap(worsen.real_capture())
    order, head = worsen.pcapng_section([worsen.Interface(1, 9), worsen.Interface(1, 6, -2**40)])
    interfaces = [worsen.Interface(1, 9), worsen.Interface(1, 6, -2**40)]
    body = [head]
    at = [len(packets) * k // 6 for k in range(1, 6)]
    for k, p in enumerate(packets):
        body.append(worsen.pcapng_packet(order, p, interfaces))
        if k == at[0]:
            body.append(worsen._block(order, 4, b"\x01" * 600_000))  # (name resolution)
        elif k == at[1]:
            body.append(struct.pack(order + "II", 6, 300_000) + b"\x00" * (300_000 - 8))
        elif k == at[2]:
            bad = bytearray(worsen.pcapng_packet(order, p, interfaces))
            struct.pack_into(order + "I", bad, 8, 9)  # interface 9: undeclared
            body.append(bytes(bad))
        elif k == at[3]:
            bad = bytearray(worsen.pcapng_packet(order, p, interfaces))
            struct.pack_into(order + "I", bad, 20, len(bad))  # captured length past the block
            body.append(bytes(bad))
        elif k == at[4]:
            body.append(worsen.pcapng_packet(order, p, interfaces, 1))
    path = tmp_path / "damaged.pcapng"
    path.write_bytes(b"".join(body))
    reference = assert_same([path])
    kinds = [a[2] for a in reference[1]]
    assert kinds.count("bad_block") == 3, reference[1]


@pytest.mark.parametrize("form", ["pcapng", "pcap-gzip", "pcapng-gzip"])
def test_cut_files_same_as_stream(form, tmp_path):
    """A file cut anywhere (in a block header, in a packet, in a gzip member) ends with the
    reference's truncated_file anomaly, after the same events."""
    source = worsen.real_capture()
    path = _pcapng_of(source, tmp_path) if form.startswith("pcapng") else source
    whole = Path(path).read_bytes()
    if form.endswith("gzip"):
        whole = Path(worsen.gzip_copy(path, tmp_path / "whole.gz")).read_bytes()
    for cut in (len(whole) - 3, len(whole) * 2 // 3 + 5, len(whole) // 2 + 1):
        cut_path = tmp_path / f"cut-{cut}"
        cut_path.write_bytes(whole[:cut])
        reference = assert_same([cut_path])
        assert reference[1][-1][2] == "truncated_file"


# --- rotated sets ------------------------------------------------------------------------


def test_pieces_overlapping_in_time_are_merged_as_the_reference_does(tmp_path):
    """Pieces whose times overlap (a record of one later than the first of the next, as
    two CPUs stamp packets now and then): merged in time order from the first late record."""
    linktype, packets = worsen.read_pcap(worsen.real_capture())
    third = len(packets) // 3
    first, second, last = packets[:third], packets[third : 2 * third], packets[2 * third :]
    late = [(ts + 5_000_000, d, n) for ts, d, n in first[-6:]]  # (5 ms into the next piece)
    paths = [worsen.write_pcap(tmp_path / "a.pcap", linktype, first[:-6] + late),
             worsen.write_pcap(tmp_path / "b.pcap", linktype, second),
             worsen.write_pcap(tmp_path / "c.pcap", linktype, last)]  # fmt: skip
    merged = []
    real = bulk.BulkCapture._merged
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bulk.BulkCapture, "_merged",
                      lambda self, *a: merged.append(a) or real(self, *a))
        assert_same(paths)
    assert merged and all(number == 0 for number, _ in merged)


def test_interleaved_files_and_a_set_with_empty_and_damaged_pieces(tmp_path):
    """Two files captured side by side (each one's connections, times interleaved), an
    empty piece, a piece with a bad record in the middle, a piece that is pcapng."""
    linktype, packets = worsen.read_pcap(worsen.real_capture())
    even, odd = packets[::2], packets[1::2]
    paths = [worsen.write_pcap(tmp_path / "even.pcap", linktype, even),
             worsen.write_pcap(tmp_path / "odd.pcap", linktype, odd)]  # fmt: skip
    assert_same(paths)
    third = len(packets) // 3
    broken = bytearray(worsen.pcap_bytes(linktype, packets[third : 2 * third]))
    struct.pack_into("<I", broken, 24 + 16 + len(packets[third][1]) + 8, 10**9)  # (2nd record)
    (tmp_path / "broken.pcap").write_bytes(broken)
    empty = worsen.write_pcap(tmp_path / "empty.pcap", linktype, [])
    ng = worsen.write_pcapng(tmp_path / "last.pcapng", packets[2 * third :],
                             interfaces=[worsen.Interface(linktype, 9)])  # fmt: skip
    first = worsen.write_pcap(tmp_path / "first.pcap", linktype, packets[:third])
    assert_same([first, empty, tmp_path / "broken.pcap", ng])


# --- pipes -------------------------------------------------------------------------------


def _through_fifo(path: Path, folder: Path, name: str) -> Path:
    """A FIFO that another process (dd, as a capture tool would) fills with the file's
    bytes, 5,000 at a time. (Not a thread of this process: a forked helper would inherit
    the write end and never see the pipe end.)"""
    fifo = folder / name
    os.mkfifo(fifo)
    FEEDERS.append(subprocess.Popen(["dd", f"if={path}", f"of={fifo}", "bs=5000",
                                     "status=none"]))  # fmt: skip
    return fifo


FEEDERS: list = []


@pytest.mark.parametrize("form", ["pcap", "pcapng", "gzip"])
def test_a_pipe_is_read_by_the_bulk_engine_as_it_comes(form, tmp_path):
    path = worsen.real_capture()
    if form == "pcapng":
        path = _pcapng_of(path, tmp_path)
    elif form == "gzip":
        path = worsen.gzip_copy(path, tmp_path / "c.gz")
    reference = outcome([path], "stream")
    for k, helper in enumerate((False, True)):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(bulk, "can_fork", lambda: True)
            got = outcome([_through_fifo(path, tmp_path, f"fifo{k}")], "bulk",
                          helper_process=helper)  # fmt: skip
        assert FEEDERS.pop().wait(timeout=60) == 0
        assert got[3]
        assert got[:3] == reference[:3]


def test_rows_small_enough_to_straddle_pcapng_blocks(tmp_path):
    """Blocks parsed 5 packets at a time: runs of EPBs cut anywhere."""
    path = _pcapng_of(worsen.real_capture(), tmp_path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(packet_columns, "MAX_ROWS", 5)
        assert_same([path])


# --- two protocols in one run --------------------------------------------------------------

ROCKETMQ_CAPTURES = sorted((worsen.CAPTURES / "rocketmq").glob("*.pcap"))


@pytest.mark.parametrize("path", ROCKETMQ_CAPTURES, ids=lambda p: p.stem)
def test_rocketmq_connections_walked_by_the_bulk_engine_same_as_stream(path):
    """RocketMQ has no fast path: its connections take the plain frame walk (the framer
    decodes every frame) in the bulk engine, while the Stream's keep theirs."""
    assert_same([path])


def test_a_capture_of_both_protocols_same_as_stream(tmp_path):
    """A Stream capture and a RocketMQ one in one file, their packets interleaved in time:
    each connection dissected as what it is, the Stream's frames as without RocketMQ."""
    linktype, stream_packets = worsen.read_pcap(worsen.real_capture())
    _, rocketmq_packets = worsen.read_pcap(ROCKETMQ_CAPTURES[0])
    shift = stream_packets[0][0] - rocketmq_packets[0][0]
    both = sorted(stream_packets + [(ts + shift + 1, d, n) for ts, d, n in rocketmq_packets],
                  key=lambda p: p[0])  # fmt: skip
    path = worsen.write_pcap(tmp_path / "both.pcap", linktype, both)
    events = assert_same([path])[0]
    alone = outcome([worsen.real_capture()], "stream")[0]
    stream_port = [e for e in events if ":5552" in e[1]]
    assert stream_port == alone
    assert any(":9876" in e[1] or ":10911" in e[1] for e in events)

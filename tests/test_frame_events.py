"""A frames table turned back into events (tables.events: HotFrames for runs of hot frames,
records for the others), as a rotated chain is analysed, gives every table the records give,
row for row: on every capture of the corpus, the regression captures and made-worse copies,
each hot run taken over columns and frame by frame (hot_input.SHORT_RUN)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import worsen

from streamdissect.analysis import analyze_events
from streamdissect.engine.dissect import Dissector, FrameEvent
from streamdissect.protocols.stream.analysis import hot_input
from streamdissect.protocols.stream.frame_events import frame_events
from streamdissect.protocols.stream.hot import HotFrames
from streamdissect.tables import schema
from streamdissect.tables.batches import frame_batches, frames_arrow

PORTS = (5552, 5553)
CAPTURES = worsen.corpus_captures()
REGRESSIONS = sorted((Path(__file__).parent / "regressions").glob("*.pcap"))
TABLES = [name for name in schema.analysis_tables() if name != "anomalies"]


def both_ways(path: Path, report_only: bool = False) -> tuple[dict, dict, bool]:
    """(every table from the frames table's events, from the records; whether every frame's
    time fits the table's int64)."""
    dissector = Dissector(ports=PORTS)
    events = list(dissector.run(str(path)))
    tcp = list(dissector.connections)
    expected = analyze_events(events, tcp_connections_after=lambda: tcp, report_only=report_only)
    made = analyze_events(frame_events(frames_arrow(str(path), ports=PORTS)),
                          tcp_connections_after=lambda: tcp, report_only=report_only)  # fmt: skip
    fit = all(0 <= e.ts_ns < 2**63 for e in events if isinstance(e, FrameEvent))
    return ({t: list(made.rows(t)) for t in TABLES}, {t: list(expected.rows(t)) for t in TABLES},
            fit)  # fmt: skip


def assert_same_tables(path: Path) -> None:
    for short_run in (0, hot_input.SHORT_RUN, 1 << 30):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(hot_input, "SHORT_RUN", short_run)
            for report_only in (False, True):
                made, expected, fit = both_ways(path, report_only)
                if fit:  # (a time past int64 is null in the table: the figures cannot agree)
                    assert made == expected, (short_run, report_only)


@pytest.mark.parametrize("path", CAPTURES + REGRESSIONS, ids=lambda p: p.stem)
def test_frame_events_give_the_tables_of_the_records(path):
    assert_same_tables(path)


@pytest.mark.parametrize("name", ["rstream-slow-consumer-3.10.pcap", "raw-deliver-v2-4.0.pcap"])
def test_a_deliver_cut_inside_its_chunk_header(tmp_path, name):
    """Snaplen cutting a Deliver (v1, v2) at each byte of its chunk header: the row keeps the
    header's whole fields (chunk_type, num_entries, num_records before chunk_id), and so
    must the events made from it (fuzz finding pcap-ca6a6c11b824)."""
    linktype, packets = worsen.read_pcap(worsen.CAPTURES / name)
    first, num_records = (schema.column_names("deliveries").index(c)
                          for c in ("chunk_first_offset", "num_records"))  # fmt: skip
    header_only = 0  # rows of Delivers cut after num_records but before chunk_id
    for length in range(70, 130):
        path = worsen.write_pcap(tmp_path / f"cut{length}.pcap", linktype,
                                 worsen.snaplen(packets, length))  # fmt: skip
        made, expected, _ = both_ways(path)
        assert made == expected, length
        header_only += sum(r[first] is None and r[num_records] is not None
                           for r in expected["deliveries"])  # fmt: skip
    assert header_only


@pytest.mark.parametrize("how", ["reorder", "duplicate", "snaplen", "dropped", "midstream"])
def test_frame_events_of_made_worse_copies(tmp_path, how):
    linktype, packets = worsen.read_pcap(worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap")
    worse = {"reorder": worsen.reorder, "duplicate": worsen.duplicate,
             "snaplen": lambda p: worsen.snaplen(p, 200),
             "dropped": lambda p: worsen.drop(p, set(worsen.data_segments(p)[3::5])),
             "midstream": lambda p: worsen.midstream(p, 11)}[how]  # fmt: skip
    assert_same_tables(worsen.write_pcap(tmp_path / "worse.pcap", linktype, worse(packets)))


def test_silences_of_made_worse_copies(tmp_path):
    linktype, packets = worsen.read_pcap(worsen.CAPTURES / "rstream-heartbeat-3.10.pcap")
    for name, worse in (("reordered", worsen.reorder(packets)),
                        ("dropped", worsen.drop(packets, set(worsen.data_segments(packets)[4::3]))),
                        ("midstream", worsen.midstream(packets, 7))):  # fmt: skip
        assert_same_tables(worsen.write_pcap(tmp_path / f"{name}.pcap", linktype, worse))
    made, _, _ = both_ways(worsen.CAPTURES / "rstream-heartbeat-3.10.pcap")
    assert any(r["heartbeats_c2s"] or r["heartbeats_s2c"] for r in made["connections"])


def test_hot_frames_and_records_both_come_back():
    """Not vacuous: the slow consumer's Credit and Deliver frames come back as HotFrames,
    its Subscribe and the handshake as records (dicts of their rows)."""
    frames = frames_arrow(str(worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap"))
    events = list(frame_events(frames))
    hot = [e for e in events if e.__class__ is HotFrames]
    assert sum(map(len, hot)) + sum(e.__class__ is FrameEvent for e in events) == frames.num_rows
    assert {0x0008, 0x0009} <= {int(k) for run in hot for k in run.key}
    commands = {e.record["command"] for e in events if e.__class__ is FrameEvent}
    assert {"Subscribe", "PeerProperties", "Tune", "Open"} <= commands


def test_each_connection_apart_gives_its_rows():
    """Deliveries of each connection's frames apart, put together: the whole capture's (a
    rotated chain is one connection's frames)."""
    path = worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap"
    frames = pa.Table.from_batches(list(frame_batches(str(path), rows_per_batch=16)))
    parts = []
    for name in pc.unique(frames["connection"]).to_pylist():
        mine = frames.filter(pc.equal(frames["connection"], name))
        parts += analyze_events(frame_events(mine)).rows("deliveries")
    whole = analyze_events(frame_events(frames)).rows("deliveries")
    assert sorted(parts, key=lambda r: r[0]) == list(whole) and len(whole) == 40


def test_pairing_and_errors_see_the_calls_and_the_codes():
    analysis = analyze_events(frame_events(frames_arrow(str(worsen.CAPTURES /
                                                            "raw-errors-3.10.pcap"))))  # fmt: skip
    latency = {r["command"]: r for r in analysis.rows("latency")}
    assert latency["PeerProperties"]["answered"] == 1 and latency["Create"]["calls"] >= 1
    errors = analysis.rows("errors")
    assert {"command": "Create", "code": 5, "code_name": "STREAM_ALREADY_EXISTS",
            "count": 1} in errors  # fmt: skip
    assert any(r["command"] == "PublishError" for r in errors)


def test_the_slow_consumer_stalls():
    path = worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap"
    analysis = analyze_events(frame_events(frames_arrow(str(path), ports=PORTS)))
    (consumer,) = [r for r in analysis.rows("credit") if r["initial_credit"] == 2]
    assert consumer["credits_granted"] == 38 and consumer["stall_count"] == 39
    ended_by = schema.column_names("stalls").index("ended_by")  # (rows: tuples in its order)
    assert sum(s[ended_by] == "credit" for s in analysis.rows("stalls")) == 38


def test_an_irregular_ledger_keeps_its_order(tmp_path):
    """Resent ids, a confirm before its publish, a PublishError and a re-declared publisher
    among regular ledgers: the publishes, confirms and backlog tables of the records."""
    from scapy.all import IP, TCP, Ether, Raw, wrpcap

    from streamdissect.protocols.stream import encode_record, make_record

    def publish(pid, ids):
        return encode_record(make_record("Publish", publisher_id=pid,
                                         messages=[(i, None, b"m") for i in ids]))  # fmt: skip

    c2s = [encode_record(make_record("DeclarePublisher", correlation_id=1, publisher_id=1,
                                     publisher_reference="", stream="s")),
           publish(1, [1, 2, 3]), publish(1, [3, 4]), publish(2, [10, 11]),
           encode_record(make_record("DeclarePublisher", correlation_id=2, publisher_id=1,
                                     publisher_reference="", stream="s")),
           publish(1, [7])]  # fmt: skip
    s2c = [encode_record(make_record("PublishConfirm", publisher_id=1, publishing_ids=[9])),
           encode_record(make_record("PublishConfirm", publisher_id=1, publishing_ids=[1, 3])),
           encode_record(make_record("PublishError", publisher_id=1,
                                     errors=[{"publishing_id": 2, "code": 0x12}])),
           encode_record(make_record("PublishConfirm", publisher_id=2, publishing_ids=[10]))]
    packets, seq = [], {"c": 1000, "s": 5000}
    order = [("c", 0), ("s", 0), ("c", 1), ("c", 2), ("s", 1), ("c", 3), ("s", 2), ("s", 3),
             ("c", 4), ("c", 5)]  # fmt: skip
    for n, (side, k) in enumerate(order):
        data = (c2s if side == "c" else s2c)[k]
        ports = (40000, 5552) if side == "c" else (5552, 40000)
        packet = Ether() / IP(src="127.0.0.1", dst="127.0.0.1") / TCP(
            sport=ports[0], dport=ports[1], flags="PA", seq=seq[side]) / Raw(data)
        packet.time = 1_700_000_000 + n / 1000
        seq[side] += len(data)
        packets.append(packet)
    path = tmp_path / "ledger.pcap"
    wrpcap(str(path), packets)
    assert_same_tables(path)
    made, _, _ = both_ways(path)
    assert {"confirmed", "errored", "unconfirmed"} <= {r[6] for r in made["publishes"]}

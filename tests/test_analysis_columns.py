"""Analyses over columns (analysis.columns) equal the record-based collectors, their
reference, on every capture of the corpus, the regression captures and made-worse copies."""

from __future__ import annotations

from pathlib import Path

import pytest
import worsen

from streamdissect.analysis import analyze
from streamdissect.protocols.stream.analysis import columns
from streamdissect.tables import schema
from streamdissect.tables.batches import frame_batches, frames_arrow

CAPTURES = worsen.corpus_captures()
REGRESSIONS = sorted((Path(__file__).parent / "regressions").glob("*.pcap"))
TABLES = {"deliveries": columns.deliveries, "throughput": columns.throughput,
          "requests": columns.requests, "latency": columns.latency, "errors": columns.errors,
          "publishes": columns.publishes, "confirms": columns.confirms,
          "backlog": columns.backlog,
          "credit_balance": lambda frames: columns.credit_ledger(frames)[2]}
# Tables whose rows use a frame's time: a time past int64 (null in the frames) is compared
# only where every time fits (throughput leaves such frames out of its seconds anyway).
TIMED = ("deliveries", "requests", "latency", "publishes", "confirms", "backlog",
         "credit_balance")


def reference(path: Path, table: str) -> list[dict]:
    rows = analyze(str(path), ports=(5552, 5553)).rows(table)
    kinds = schema.TABLES[table]
    fitted = [{c.name: schema.fit(c.kind, row[c.name] if isinstance(row, dict) else row[i])
               for i, c in enumerate(kinds)} for row in rows]  # fmt: skip
    # (a frame whose time is past int64 has no second to be counted in)
    return [r for r in fitted if table != "throughput" or r["second_ns"] is not None]


def times_fit(path: Path) -> bool:
    from streamdissect.engine.dissect import Dissector, FrameEvent

    events = Dissector(ports=(5552, 5553)).run(str(path))
    return all(0 <= e.ts_ns < 2**63 for e in events if isinstance(e, FrameEvent))


@pytest.mark.parametrize("table", sorted(TABLES))
@pytest.mark.parametrize("path", CAPTURES + REGRESSIONS, ids=lambda p: p.stem)
def test_columns_equal_the_collectors(path, table):
    frames = frames_arrow(str(path), ports=(5552, 5553))
    result = TABLES[table](frames)
    assert result.schema.equals(schema.arrow_schema(table))
    if table not in TIMED or times_fit(path):
        assert result.to_pylist() == reference(path, table)


@pytest.mark.parametrize("table", sorted(TABLES))
@pytest.mark.parametrize("how", ["reorder", "duplicate", "snaplen", "dropped", "midstream"])
def test_columns_equal_the_collectors_on_made_worse_copies(tmp_path, table, how):
    linktype, packets = worsen.read_pcap(worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap")
    worse = {"reorder": worsen.reorder, "duplicate": worsen.duplicate,
             "snaplen": lambda p: worsen.snaplen(p, 200),
             "dropped": lambda p: worsen.drop(p, set(worsen.data_segments(p)[3::5])),
             "midstream": lambda p: worsen.midstream(p, 11)}[how]
    path = worsen.write_pcap(tmp_path / "worse.pcap", linktype, worse(packets))
    frames = frames_arrow(str(path), ports=(5552, 5553))
    assert TABLES[table](frames).to_pylist() == reference(path, table)


def test_the_same_code_runs_per_connection_group():
    """Deliveries of each connection's frames apart, put together: the whole capture's."""
    import pyarrow as pa
    import pyarrow.compute as pc

    path = worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap"
    frames = pa.Table.from_batches(list(frame_batches(str(path), rows_per_batch=16)))
    parts = [columns.deliveries(frames.filter(pc.equal(frames["connection"], name)))
             for name in pc.unique(frames["connection"]).to_pylist()]  # fmt: skip
    together = pa.concat_tables(parts).sort_by([("ts_ns", "ascending")]).to_pylist()
    assert together == columns.deliveries(frames).to_pylist() and len(together) == 40


def connections_both_ways(path: Path) -> tuple[list[dict], list[dict], bool]:
    """(over columns, the collector's) for one capture, and whether every time fits int64."""
    from streamdissect.analysis import analyze_events
    from streamdissect.engine.dissect import Dissector, FrameEvent
    from streamdissect.protocols.stream.frame_table import FrameColumns

    dissector = Dissector(ports=(5552, 5553))
    events = list(dissector.run(str(path)))
    builder = FrameColumns()
    for event in events:
        if isinstance(event, FrameEvent):
            builder.add(event)
    import pyarrow as pa

    frames = (pa.Table.from_batches([builder.batch()]) if builder.rows else
              pa.Table.from_batches([], schema=schema.arrow_schema("frames")))  # fmt: skip
    got = columns.connections(frames, list(dissector.connections)).to_pylist()
    analysis = analyze_events(events, tcp_connections_after=lambda: list(dissector.connections))
    expected = [{c.name: schema.fit(c.kind, row[c.name]) for c in schema.CONNECTIONS}
                for row in analysis.rows("connections")]  # fmt: skip
    times_fit = all(0 <= e.ts_ns < 2**63 for e in events if isinstance(e, FrameEvent))
    return got, expected, times_fit


@pytest.mark.parametrize("path", CAPTURES + REGRESSIONS, ids=lambda p: p.stem)
def test_connections_over_columns_equal_the_collector(path):
    got, expected, times_fit = connections_both_ways(path)
    if times_fit:  # (a time past int64 is null in the frames: silences cannot be the same)
        assert got == expected
    assert [r["connection"] for r in got] == [r["connection"] for r in expected]


def test_connections_over_columns_on_made_worse_copies_and_silences(tmp_path):
    linktype, packets = worsen.read_pcap(worsen.CAPTURES / "rstream-heartbeat-3.10.pcap")
    for name, worse in (("reordered", worsen.reorder(packets)),
                        ("dropped", worsen.drop(packets, set(worsen.data_segments(packets)[4::3]))),
                        ("midstream", worsen.midstream(packets, 7))):  # fmt: skip
        path = worsen.write_pcap(tmp_path / f"{name}.pcap", linktype, worse)
        got, expected, _ = connections_both_ways(path)
        assert got == expected, name
    got, _, _ = connections_both_ways(worsen.CAPTURES / "rstream-heartbeat-3.10.pcap")
    assert any(r["heartbeats_c2s"] or r["heartbeats_s2c"] for r in got)


def test_pairing_and_errors_see_the_calls_and_the_codes():
    frames = frames_arrow(str(worsen.CAPTURES / "raw-errors-3.10.pcap"))
    latency = {r["command"]: r for r in columns.latency(frames).to_pylist()}
    assert latency["PeerProperties"]["answered"] == 1 and latency["Create"]["calls"] >= 1
    errors = columns.errors(frames).to_pylist()
    assert {"command": "Create", "code": 5, "code_name": "STREAM_ALREADY_EXISTS",
            "count": 1} in errors  # fmt: skip
    assert any(r["command"] == "PublishError" for r in errors)


def test_an_irregular_ledger_goes_through_the_collector_and_keeps_its_order(tmp_path):
    """Resent ids, a confirm before its publish, a PublishError and a re-declared publisher:
    the collector's own code over those rows, merged in order with the regular ledgers."""
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
    for table in ("publishes", "confirms", "backlog"):
        got = TABLES[table](frames_arrow(str(path))).to_pylist()
        assert got == reference(path, table), table
    outcomes = [r["outcome"] for r in columns.publishes(frames_arrow(str(path))).to_pylist()]
    assert {"confirmed", "errored", "unconfirmed"} <= set(outcomes)


def credit_both_ways(path: Path) -> tuple[list, list, list, list]:
    """(credit, stalls) over columns and from the collector, for one capture."""
    from streamdissect.engine.dissect import Dissector

    dissector = Dissector(ports=(5552, 5553))
    list(dissector.run(str(path)))
    credit, stalls = columns.credit(frames_arrow(str(path), ports=(5552, 5553)),
                                    list(dissector.connections))  # fmt: skip
    return (credit.to_pylist(), reference(path, "credit"), stalls.to_pylist(),
            reference(path, "stalls"))


@pytest.mark.parametrize("path", CAPTURES + REGRESSIONS, ids=lambda p: p.stem)
def test_credit_and_stalls_over_columns_equal_the_collector(path):
    credit, expected_credit, stalls, expected_stalls = credit_both_ways(path)
    if times_fit(path):
        assert (credit, stalls) == (expected_credit, expected_stalls)


@pytest.mark.parametrize("how", ["reorder", "duplicate", "dropped", "midstream"])
def test_credit_and_stalls_over_columns_on_made_worse_copies(tmp_path, how):
    linktype, packets = worsen.read_pcap(worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap")
    worse = {"reorder": worsen.reorder, "duplicate": worsen.duplicate,
             "dropped": lambda p: worsen.drop(p, set(worsen.data_segments(p)[3::5])),
             "midstream": lambda p: worsen.midstream(p, 40)}[how]  # fmt: skip
    path = worsen.write_pcap(tmp_path / "worse.pcap", linktype, worse(packets))
    credit, expected_credit, stalls, expected_stalls = credit_both_ways(path)
    assert (credit, stalls) == (expected_credit, expected_stalls)


def test_the_slow_consumer_stalls_over_columns():
    credit, _, stalls, _ = credit_both_ways(worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap")
    (consumer,) = [r for r in credit if r["initial_credit"] == 2]
    assert consumer["credits_granted"] == 38 and consumer["stall_count"] == 39
    assert sum(s["ended_by"] == "credit" for s in stalls) == 38


def test_all_tables_at_once_equal_analyze():
    from streamdissect.engine.dissect import Dissector

    path = worsen.CAPTURES / "rstream-sac-4.0.pcap"
    dissector = Dissector(ports=(5552, 5553))
    list(dissector.run(str(path)))
    found = columns.tables(frames_arrow(str(path), ports=(5552, 5553)),
                           list(dissector.connections))  # fmt: skip
    assert set(found) == set(schema.TABLES) - {"frames", "anomalies"}
    for name, table in found.items():
        assert table.schema.equals(schema.arrow_schema(name))
        assert table.to_pylist() == reference(path, name), name

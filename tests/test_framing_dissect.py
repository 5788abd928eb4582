"""The pipeline: which connections, roles, names, tables, several files as one."""

from __future__ import annotations

import pytest
import worsen
from frame_rows import frame_rows

from streamdissect.capture import CaptureError
from streamdissect.engine.dissect import Anomaly, Dissector, FrameEvent, dissect


def frames_of(events) -> list[tuple]:
    return frame_rows(events)[0]


def test_dissect_api_and_tables(real):
    path, _, _ = real
    dissector = Dissector()
    events = list(dissector.run(str(path)))
    assert events and all(isinstance(e, FrameEvent | Anomaly) for e in events)
    assert frames_of(events) == frames_of(dissect(str(path)))
    rows = dissector.connections
    assert rows and all(
        r.server.endswith(":5552") and r.tcp_end in ("fin", "rst", "open") for r in rows
    )
    assert sum(r.frames_c2s + r.frames_s2c for r in rows) == len(frames_of(events))
    assert all(r.start_ns <= r.end_ns for r in rows)
    assert dissector.anomalies == [e for e in events if isinstance(e, Anomaly)]


def test_other_port_by_heuristic_by_option_or_not_at_all(real, tmp_path):
    path, linktype, packets = real
    original = frames_of(dissect(str(path)))
    moved = worsen.write_pcap(
        tmp_path / "p.pcap", linktype, worsen.rewrite_port(packets, 5552, 15552)
    )
    renamed = [(c.replace(":5552", ":15552"), *rest) for c, *rest in original]
    assert frames_of(dissect(str(moved))) == renamed  # heuristic: same roles, same frames
    assert frames_of(dissect(str(moved), ports=[15552], heuristic=False)) == renamed
    assert frames_of(dissect(str(moved), heuristic=False)) == []


def test_heuristic_roles_without_syn(real, tmp_path):
    _, linktype, packets = real
    no_syn = [p for p in packets if not worsen.tcp_of(p[1]).flags & 0x02]
    moved = worsen.write_pcap(
        tmp_path / "p.pcap", linktype, worsen.rewrite_port(no_syn, 5552, 15552)
    )
    dissector = Dissector()
    frames = frames_of(dissector.run(str(moved)))
    assert frames
    # the PeerProperties sender is the client even without a SYN or a known port
    assert all(r.server.endswith(":15552") for r in dissector.connections)


def test_port_reuse_gets_numbered_ids(real, tmp_path):
    path, linktype, packets = real
    later = packets[-1][0] + 10**9 - packets[0][0]
    twice = packets + [(ts + later, d, w) for ts, d, w in packets]  # same ports, same ISNs
    dissector = Dissector()
    frames = frames_of(dissector.run(str(worsen.write_pcap(tmp_path / "t.pcap", linktype, twice))))
    once = frames_of(dissect(str(path)))
    assert len(frames) == 2 * len(once)
    ids = [r.connection for r in dissector.connections]
    assert len(ids) == 2 * len({c for c, *_ in once})
    assert sum(i.endswith("#2") for i in ids) == len(ids) // 2


def test_several_files_are_one_capture_in_time_order(real, tmp_path):
    path, linktype, packets = real
    a = worsen.write_pcap(tmp_path / "a.pcap", linktype, packets[0::2])
    b = worsen.write_pcap(tmp_path / "b.pcap", linktype, packets[1::2])
    assert frames_of(dissect([str(b), str(a)])) == frames_of(dissect(str(path)))


def test_ipv6_connections_are_named_with_brackets(real, tmp_path):
    path, _, packets = real
    v6 = [(ts, worsen.as_ipv6(d, ()), 0) for ts, d, _ in packets]
    v6 = [(ts, d, len(d)) for ts, d, _ in v6]
    frames = frames_of(dissect(str(worsen.write_pcap(tmp_path / "6.pcap", 1, v6))))
    assert len(frames) == len(frames_of(dissect(str(path))))
    assert frames[0][0].startswith("[2001:db8::1]:") and "-[2001:db8::1]:5552" in frames[0][0]


def test_unreadable_input_raises_at_once(tmp_path):
    bad = tmp_path / "x.pcap"
    bad.write_text("not a capture")
    with pytest.raises(CaptureError):
        dissect(str(bad))


def test_other_protocols_on_other_ports_are_left_alone(real, tmp_path):
    _, linktype, packets = real
    moved = worsen.rewrite_port(packets, 5552, 8080)
    first_data = {}
    for i in worsen.data_segments(moved):
        first_data.setdefault(worsen.tcp_of(moved[i][1]).flow, i)
    for i in first_data.values():  # every direction now opens with something else
        ts, data, wirelen = moved[i]
        t = worsen.tcp_of(data)
        text = (b"GET / HTTP/1.1\r\n" * 100)[: t.payload_len]
        moved[i] = (ts, data[: t.payload_at] + text + data[t.payload_at + t.payload_len :],
                    wirelen)
    dissector = Dissector()
    events = list(dissector.run(str(worsen.write_pcap(tmp_path / "h.pcap", linktype, moved))))
    assert events == [] and dissector.connections == []

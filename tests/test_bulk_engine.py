"""The bulk engine gives exactly the streaming engine's output: every frame event and
anomaly (ts, connection, direction, offset, record dict), the anomalies and connections
tables, on every corpus capture and on made-worse copies, with blocks small enough that
frames, segments and records straddle them."""

from __future__ import annotations

from pathlib import Path

import pytest
import worsen

from streamdissect import bulk
from streamdissect.dissect import Dissector, FrameEvent


def outcome(path: Path, engine: str, **options) -> tuple[list, list, list]:
    dissector = Dissector(engine=engine, **options)
    events = []
    for ev in dissector.run(str(path)):
        if isinstance(ev, FrameEvent):
            events.append((ev.ts_ns, ev.connection, ev.direction, ev.stream_offset,
                           ev.record.to_dict(show_secrets=True)))  # fmt: skip
        else:
            events.append((ev.ts_ns, ev.connection, ev.direction, ev.kind, ev.stream_offset,
                           ev.length, ev.detail))  # fmt: skip
    anomalies = [(a.ts_ns, a.connection, a.kind, a.stream_offset, a.length, a.detail)
                 for a in dissector.anomalies]  # fmt: skip
    return events, anomalies, dissector.connections


def assert_same(path: Path, **options) -> None:
    reference = outcome(path, "stream", **options)
    assert reference[0], "nothing to compare"
    for block in (bulk.BLOCK, 70_000, 9_000):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(bulk, "BLOCK", block)
            got = outcome(path, "bulk", **options)
        for name, ref, new in zip(("events", "anomalies", "connections"), reference, got):
            assert len(new) == len(ref), (name, block)
            for i, (a, b) in enumerate(zip(ref, new)):
                assert a == b, (name, block, i)


@pytest.mark.parametrize("path", worsen.corpus_captures(), ids=lambda p: p.stem)
@pytest.mark.parametrize("publish_messages", [True, False])
def test_corpus_same_as_stream(path, publish_messages):
    assert_same(path, publish_messages=publish_messages)
    if not publish_messages:  # what analyze asks for: no message bodies kept at all
        assert_same(path, publish_messages=False, deliver_keep_limit=0)


@pytest.fixture(scope="module")
def real():
    return worsen.read_pcap(worsen.real_capture())


def _data_rows(packets):
    return worsen.data_segments(packets)


WORSE = {
    "reordered": lambda p: worsen.reorder(p),
    "duplicated": lambda p: worsen.duplicate(p),
    "reordered+duplicated": lambda p: worsen.duplicate(worsen.reorder(p)),
    "midstream": lambda p: worsen.midstream(p, len(p) // 3),
    "dropped": lambda p: worsen.drop(p, {_data_rows(p)[len(_data_rows(p)) // 2]}),
    "snaplen96": lambda p: worsen.snaplen(p, 96),
    "snaplen200": lambda p: worsen.snaplen(p, 200),
    "vlan": lambda p: [(ts, worsen.with_vlan_tags(d, 1), n + 4) for ts, d, n in p],
}


@pytest.mark.parametrize("name", sorted(WORSE))
def test_worsened_same_as_stream(real, tmp_path, name):
    linktype, packets = real
    path = worsen.write_pcap(tmp_path / "w.pcap", linktype, WORSE[name](packets))
    assert_same(path)
    assert_same(path, publish_messages=False, deliver_keep_limit=0)


def test_other_link_layers_and_formats_same_as_stream(real, tmp_path):
    linktype, packets = real
    raw = [(ts, worsen.as_raw(d), n - 14) for ts, d, n in packets]
    assert_same(worsen.write_pcap(tmp_path / "raw.pcap", 101, raw))
    big = worsen.write_pcap(tmp_path / "be.pcap", linktype, packets, big_endian=True,
                            nanoseconds=True)  # fmt: skip
    assert_same(big)
    assert_same(worsen.to_pcapng(big, tmp_path / "x.pcapng"))
    assert_same(worsen.gzip_copy(big, tmp_path / "x.pcap.gz"))


def test_helper_process_same_as_stream(real, tmp_path, monkeypatch):
    monkeypatch.setattr(bulk, "_can_fork", lambda: True)
    linktype, packets = real
    path = worsen.write_pcap(tmp_path / "h.pcap", linktype, worsen.duplicate(packets))
    reference = outcome(path, "stream")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bulk, "BLOCK", 9_000)
        assert outcome(path, "bulk", helper_process=True) == reference
    whole = path.read_bytes()
    path.write_bytes(whole[:-7])
    assert outcome(path, "bulk", helper_process=True) == outcome(path, "stream")


def test_helper_choice_is_deterministic(real, tmp_path, monkeypatch):
    """The helper runs when a second CPU exists and the file has more than one block,
    whatever the load average says (time and memory must not depend on what ran before)."""
    monkeypatch.setattr(bulk.os, "getloadavg", lambda: (64.0, 64.0, 64.0), raising=False)
    monkeypatch.setattr(bulk.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert bulk._can_fork() == hasattr(bulk.os, "fork")
    monkeypatch.setattr(bulk.os, "sched_getaffinity", lambda pid: {0})
    assert not bulk._can_fork()
    monkeypatch.setattr(bulk, "_can_fork", lambda: True)
    used = []
    real_layout = bulk.helper_layout
    monkeypatch.setattr(bulk, "helper_layout", lambda *a: used.append(1) or real_layout(*a))
    linktype, packets = real
    path = worsen.write_pcap(tmp_path / "h.pcap", linktype, packets)
    outcome(path, "bulk", helper_process=True)  # smaller than a block: nothing to overlap
    assert not used
    monkeypatch.setattr(bulk, "BLOCK", 9_000)
    assert path.stat().st_size > 9_000
    outcome(path, "bulk", helper_process=True)
    assert used


def test_cut_file_same_as_stream(real, tmp_path):
    linktype, packets = real
    whole = worsen.pcap_bytes(linktype, packets)
    for cut in (len(whole) - 5, len(whole) - 40, len(whole) * 2 // 3):
        path = tmp_path / f"cut{cut}.pcap"
        path.write_bytes(whole[:cut])
        assert_same(path)


REGRESSIONS = sorted((Path(__file__).parent / "regressions").glob("pcap-*.pcap"))


@pytest.mark.parametrize("path", REGRESSIONS, ids=lambda p: p.name)
def test_fuzz_findings_same_as_stream(path):
    """Inputs on which the fuzz campaign found the engines disagreeing (a Tune changing the
    frame limit in the same block or the other direction, the roles of a SYN-less
    connection)."""
    reference = outcome(path, "stream")
    for block in (bulk.BLOCK, 9_000):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(bulk, "BLOCK", block)
            assert outcome(path, "bulk") == reference

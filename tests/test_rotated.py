"""Rotated capture sets: every shipped capture cut into 3 and 5 pieces (tests/rotate.py, as
`tcpdump -C` cuts), each piece dissected on its own, then stitched (streamdissect.rotated),
gives the tables `analysis.analyze` gives of the whole file: frames across the cuts decoded,
requests paired with responses in the next piece, no anomaly of the cuts themselves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import rotate
import worsen

from streamdissect.analysis.driver import analyze
from streamdissect.rotated.local import TABLES, analyze_set, to_arrow
from streamdissect.rotated.stitch import plan

PORTS = (5552, 5553)
CAPTURES = worsen.corpus_captures()


def rows(arrow) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in arrow.to_pylist())


def whole(path: Path, **options) -> dict:
    analysis = analyze(str(path), ports=PORTS, report_only=True, helper_process=False, **options)
    return {table: rows(to_arrow(table, getattr(analysis, table))) for table in TABLES}


@pytest.mark.parametrize("pieces,offset", [(3, 0), (5, 0), (4, 3)])
@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.stem)
def test_pieces_give_the_figures_of_the_whole_file(capture, pieces, offset, tmp_path):
    paths = rotate.cut(capture, pieces, tmp_path, offset)
    got = analyze_set([str(p) for p in paths], ports=PORTS, helper_process=False)
    expected = whole(capture)
    for table in TABLES:
        assert rows(got[table]) == expected[table], table


def test_the_cuts_do_cut_connections(tmp_path):
    """The test above is not vacuous: cut pieces start mid-stream and frames span cuts."""
    capture = worsen.CAPTURES / "rstream-publish-confirm-3.10.pcap"
    paths = rotate.cut(capture, 5, tmp_path)
    from streamdissect.rotated.facts import analyze_piece

    facts = [analyze_piece(str(p), ports=PORTS, report_only=True, helper_process=False)[1]
             for p in paths]  # fmt: skip
    the_plan = plan(facts)
    assert the_plan.sets == [[0, 1, 2, 3, 4]]
    assert the_plan.chains and any(chain.frames for chain in the_plan.chains.values())
    alone = analyze(str(paths[2]), ports=PORTS, report_only=True, helper_process=False)
    assert "midstream_start" in set(alone.anomalies["kind"])


def test_pieces_of_two_captures_are_two_sets(tmp_path):
    a = rotate.cut(worsen.CAPTURES / "rstream-publish-confirm-3.10.pcap", 3, tmp_path / "a")
    b = rotate.cut(worsen.CAPTURES / "rstream-consume-credit-3.10.pcap", 3, tmp_path / "b")
    from streamdissect.rotated.facts import analyze_piece

    facts = [analyze_piece(str(p), ports=PORTS, report_only=True, helper_process=False)[1]
             for p in [*a, *b]]  # fmt: skip
    assert sorted(plan(facts).sets) == [[0, 1, 2], [3, 4, 5]]


LOWERED_FRAME_MAX = 256 * 1024  # the consumer's Tune: every chunk of 400 kB is above it


@pytest.fixture(scope="module")
def over_limit_capture(tmp_path_factory) -> Path:
    """conftest's big capture (rstream and the real 3.10 broker: Publish frames of 400 kB,
    Deliver chunks of one or more of them), the consumer asking for a frame max of 256 KiB in
    its Tune: the 3.10 broker sends its chunks whole all the same (brokers before 4.3.5 do),
    so every Deliver is above the negotiated limit, on purpose, in every run."""
    from conftest import CLIENT, record_on_lo

    consumer = 'Consumer("127.0.0.1", 5552, username="guest", password="guest"'
    assert consumer in CLIENT
    path = tmp_path_factory.mktemp("over-limit") / "big.pcap"
    record_on_lo(path, CLIENT.replace(consumer, consumer + f", frame_max={LOWERED_FRAME_MAX}"))
    return path


def first_times(paths: list[Path]) -> list[int]:
    return [worsen.read_pcap(p)[1][0][0] for p in paths]


def piece_of(starts: list[int], ts: int) -> int:
    """The piece a time falls in, by the pieces' first times."""
    return max(k for k, start in enumerate(starts) if start <= ts)


def test_big_frames_across_cuts(over_limit_capture, tmp_path):
    """Publish frames of 400 kB and Deliver chunks above the negotiated frame max, cut
    mid-frame: a later piece's frames above the limit negotiated in an earlier one are
    frame_too_large there too, as in the whole file (the limit is carried across the cut).
    (The streaming engine, the reference; the next test holds the bulk one to it.)"""
    capture = over_limit_capture
    analysis = analyze(str(capture), ports=PORTS, report_only=True, helper_process=False,
                       engine="stream")  # fmt: skip
    too_large = analysis.anomalies.query("kind == 'frame_too_large'")
    assert len(too_large) and all(f"frame max {LOWERED_FRAME_MAX}" in d for d in too_large["detail"])
    started = dict(zip(analysis.connections["connection"], analysis.connections["start_ns"]))
    expected = whole(capture, engine="stream")
    # cuts: just before the packet that brings the first Deliver above the limit (so it is
    # read in a later piece than its connection's Tune), and two packets into it (mid-frame)
    times = [ts for ts, _, _ in worsen.read_pcap(capture)[1]]
    first = next(n for n, ts in enumerate(times) if ts >= too_large["ts_ns"].min())
    for pieces, at in ((3, first), (7, first + 2)):
        share = len(times) // pieces
        k = min(range(1, pieces), key=lambda k: abs(at - k * share))
        paths = rotate.cut(capture, pieces, tmp_path / str(pieces), offset=at - k * share)
        starts = first_times(paths)
        if at == first:  # (not vacuous: read in a later piece than its connection's Tune)
            assert any(piece_of(starts, row.ts_ns) > piece_of(starts, started[row.connection])
                       for row in too_large.itertuples())  # fmt: skip
        got = analyze_set([str(p) for p in paths], ports=PORTS, helper_process=False,
                          engine="stream")  # fmt: skip
        for table in TABLES:
            assert rows(got[table]) == expected[table], (pieces, table)


def test_two_copies_of_a_rotated_capture_stay_two_sets(tmp_path):
    """The same capture archived twice, both cut: identical four-tuples, sequence numbers and
    times in both, yet each copy is its own set and gives the whole file's figures."""
    capture = worsen.CAPTURES / "rstream-consume-credit-3.10.pcap"
    a = rotate.cut(capture, 4, tmp_path / "a", offset=1)
    b = rotate.cut(capture, 4, tmp_path / "b", offset=1)
    got = analyze_set([str(p) for p in [*a, *b]], ports=PORTS, helper_process=False)
    expected = whole(capture)
    for table in TABLES:
        if table in ("throughput", "errors"):  # (summed over both copies)
            continue
        assert rows(got[table]) == sorted(expected[table] * 2), table


WORSE = {
    "reordered": lambda p: worsen.reorder(p),
    "duplicated": lambda p: worsen.duplicate(p),
    "lost": lambda p: worsen.drop(p, set(worsen.data_segments(p)[5::7])),
    "late start": lambda p: worsen.midstream(p, 6),
    "snaplen 120": lambda p: worsen.snaplen(p, 120),
}


@pytest.mark.parametrize("damage", sorted(WORSE))
def test_damaged_captures_cut_in_pieces_still_give_every_table(damage, tmp_path):
    """TCP damage across a cut is not carried over (README says so), but pieces of a
    damaged capture never fail: every table is made, each connection named once, and a
    clean stretch of the capture keeps its frames."""
    capture = worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap"
    link, packets = worsen.read_pcap(capture)
    path = worsen.write_pcap(tmp_path / "worse.pcap", link, WORSE[damage](packets))
    pieces = rotate.cut(path, 5, tmp_path / "pieces", offset=2)
    got = analyze_set([str(p) for p in pieces], ports=PORTS, helper_process=False)
    expected = analyze(str(path), ports=PORTS, report_only=True, helper_process=False)
    assert set(got) == set(TABLES)
    names = got["connections"]["connection"].to_pylist()
    assert len(names) == len(set(names)) == len(expected.connections)
    chunks = got["deliveries"].num_rows  # (a cut by snaplen has no record counts)
    assert chunks >= 0.8 * len(expected.deliveries)


@pytest.mark.parametrize("block", [None, 1 << 20, 70_000, 9_000])
def test_the_bulk_engine_takes_the_clients_tune_as_the_stream_engine_does(
        over_limit_capture, block, monkeypatch):  # fmt: skip
    """Both Tunes of a connection walked in one block (the server's offer of 1 MiB, then the
    client's answer of 256 KiB): the limit is the client's answer, as frame by frame, so the
    same Delivers are frame_too_large with either engine, wherever blocks fall."""
    from streamdissect.capture import blocks

    def too_large(engine: str) -> list[tuple]:
        analysis = analyze(str(over_limit_capture), ports=PORTS, report_only=True,
                           helper_process=False, engine=engine)  # fmt: skip
        rows = analysis.anomalies.query("kind == 'frame_too_large'")
        return sorted(zip(rows["connection"], rows["stream_offset"], rows["detail"]))

    expected = too_large("stream")
    assert expected and all(f"frame max {LOWERED_FRAME_MAX}" in d for _, _, d in expected)
    if block is not None:
        monkeypatch.setattr(blocks, "BLOCK", block)
        monkeypatch.setattr(blocks, "FIRST_BLOCK", min(block, blocks.FIRST_BLOCK))
    assert too_large("bulk") == expected

"""Rotated RocketMQ captures in one process, as the Spark job makes their tables
(rotated.local.analyze_servers: each piece dissected apart with framers that keep their
edges, the stitching plan, one run of RocketMQ's analyses a server over every piece): every
shipped RocketMQ capture cut into pieces (as `tcpdump -C` cuts) gives the tables and frames
of the whole file, the frames cut between two files decoded across the cut."""

from __future__ import annotations

import json

import pytest
import rotate
import worsen
from rocketmq_support import CAPTURES, NAMES

from streamdissect.analysis.driver import analyze
from streamdissect.rotated.facts import analyze_piece
from streamdissect.rotated.local import analyze_servers
from streamdissect.rotated.stitch import plan
from streamdissect.tables import schema
from streamdissect.tables.batches import frames_arrow

TABLES = [t for t in schema.analysis_tables("rocketmq", on_request=True)
          if t not in ("anomalies", *schema.ON_REQUEST)]  # (messages: its own tests)


def key(row: dict) -> str:
    return json.dumps(row, sort_keys=True, default=str)


@pytest.mark.parametrize("pieces,offset", [(3, 0), (5, 0), (4, 3)])
@pytest.mark.parametrize("name", NAMES)
def test_pieces_give_the_tables_of_the_whole_file(name, pieces, offset, tmp_path):
    whole = CAPTURES / f"{name}.pcap"
    paths = [str(p) for p in rotate.cut(whole, pieces, tmp_path, offset=offset)]
    got = analyze_servers(paths, "rocketmq", TABLES, frames=True)
    analysis = analyze(str(whole))
    for table in TABLES:
        expected = analysis.arrow(table).to_pylist()
        mine = got[table].to_pylist() if table in got else []
        assert sorted(map(key, mine)) == sorted(map(key, expected)), table
    frames = frames_arrow(str(whole), protocol="rocketmq").to_pylist()
    assert sorted(map(key, got["rocketmq_frames"].to_pylist())) == sorted(map(key, frames))


def test_frames_are_decoded_across_the_cuts(tmp_path):
    """The compressed sends (40 kB frames over many segments) cut between files: the plan
    chains the connections and decodes frames that neither file has whole."""
    paths = rotate.cut(CAPTURES / "rmq-java-compressed.pcap", 5, tmp_path)
    the_plan = plan([analyze_piece(str(p), report_only=True)[1] for p in paths])
    chains = list(the_plan.chains.values())
    assert chains and {c.protocol for c in chains} == {"rocketmq"}
    assert sum(len(c.frames) for c in chains) > 5
    assert not the_plan.anomalies


def call_cuts(records: list[bytes], frames: list[dict]) -> list[int]:
    """Where to cut the packets so that a call is split between two files: after the
    packet that completes each answered request, and before the one that completes its
    response (the frames' times are their completing packets')."""
    times = [rotate.timestamp_ns(record) for record in records]
    asked = {}  # (connection, the response's direction, opaque) -> the request's time
    cuts = set()
    for frame in frames:
        peer = "s2c" if frame["direction"] == "c2s" else "c2s"
        if not frame["response"]:
            asked[(frame["connection"], peer, frame["opaque"])] = frame["ts_ns"]
        elif frame["request_code"] is not None:
            request_ns = asked[(frame["connection"], frame["direction"], frame["opaque"])]
            cuts.add(max(k for k, t in enumerate(times) if t == request_ns) + 1)
            cuts.add(times.index(frame["ts_ns"]))
    return sorted(c for c in cuts if 0 < c < len(records))


@pytest.mark.parametrize("name", NAMES)
def test_calls_cut_between_files_keep_their_request(name, tmp_path):
    """A request at the end of one file, its response in the next: the response's piece
    never saw the request (its framer's open requests are not carried across the cut), yet
    the stitched frames and analyses name it, because the per-server run names every
    response again from the frames before it in capture order (replay.replay_events)."""
    whole = CAPTURES / f"{name}.pcap"
    frames = frames_arrow(str(whole), protocol="rocketmq").to_pylist()
    analysis = analyze(str(whole))
    expected = {t: sorted(map(key, analysis.arrow(t).to_pylist())) for t in TABLES}
    expected["rocketmq_frames"] = sorted(map(key, frames))
    cuts = call_cuts(rotate.records(whole.read_bytes()), frames)
    assert cuts  # (every capture has answered calls)
    for cut in cuts:
        paths = [str(p) for p in rotate.cut_at(whole, [cut], tmp_path / str(cut))]
        got = analyze_servers(paths, "rocketmq", TABLES, frames=True)
        for table, rows in expected.items():
            mine = got[table].to_pylist() if table in got else []
            assert sorted(map(key, mine)) == rows, (cut, table)


def test_a_frame_taken_at_the_end_of_a_file_keeps_its_own_packets_time(tmp_path):
    """rmq-broker-stop starts inside a name-server connection: the last response of it
    (s2c) is read after a mid-stream resync, and no frame after it confirms its start, so
    it is taken at the end of the file that holds it. Cut by `editcap -c` so that file is
    not the set's last (the connection's FIN and ACKs in the next), the stitched frames give
    the response the time of the packet that carried it, as the whole file does."""
    import subprocess

    whole = CAPTURES / "rmq-broker-stop.pcap"
    _, packets = worsen.read_pcap(whole)
    carried = [(n, ts) for n, (ts, data, _) in enumerate(packets, 1)
               if (tcp := worsen.tcp_of(data)).payload_len and tcp.flow[1] == 9876
               and tcp.flow[3] == 41120]  # fmt: skip
    (number, own_ts), last_ts = carried[-1], packets[-1][0]
    assert own_ts < last_ts
    name = "127.0.0.1:41120-127.0.0.1:9876"

    def response_ts(frames: list[dict]) -> list[int]:
        return [f["ts_ns"] for f in frames if f["connection"] == name and f["direction"] == "s2c"]

    frames = frames_arrow(str(whole), protocol="rocketmq").to_pylist()
    assert response_ts(frames) == [own_ts]
    for count in (number, number + 1, number + 2, 20):  # (the response ends a file or not)
        folder = tmp_path / str(count)
        folder.mkdir()
        subprocess.run(["editcap", "-c", str(count), str(whole), str(folder / "piece.pcap")],
                       check=True, capture_output=True)  # fmt: skip
        paths = sorted(str(p) for p in folder.iterdir())
        assert len(paths) > (number - 1) // count + 1  # (its file is not the last)
        got = analyze_servers(paths, "rocketmq", TABLES, frames=True)
        assert response_ts(got["rocketmq_frames"].to_pylist()) == [own_ts], count
        assert sorted(map(key, got["rocketmq_frames"].to_pylist())) == sorted(map(key, frames))

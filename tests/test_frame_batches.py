"""Frames as Arrow batches (frame_batches) hold exactly the reference rows built from each
record (protocols.stream.frame_table.frame_row), on every capture of the corpus and its
made-worse copies."""

from __future__ import annotations

import struct
from pathlib import Path

import pyarrow as pa
import pytest
import worsen

from streamdissect.analysis import frames_table
from streamdissect.engine.dissect import Dissector, FrameEvent
from streamdissect.protocols.stream.frame_table import frame_row
from streamdissect.tables import schema
from streamdissect.tables.batches import frame_batches, frames_arrow

CAPTURES = worsen.corpus_captures()
REGRESSIONS = sorted((Path(__file__).parent / "regressions").glob("*.pcap"))


def reference(path: Path, **options) -> list[dict]:
    events = Dissector(ports=(5552, 5553), **options).run(str(path))
    return [frame_row(e) for e in events if isinstance(e, FrameEvent)]


def columnar(path: Path, **options) -> list[dict]:
    table = frames_arrow(str(path), ports=(5552, 5553), **options)
    assert table.schema.equals(schema.arrow_schema("frames"))
    return table.to_pylist()


@pytest.mark.parametrize("path", CAPTURES + REGRESSIONS, ids=lambda p: p.stem)
def test_batches_hold_the_reference_rows(path):
    expected = reference(path)
    assert columnar(path) == expected
    assert expected or path in REGRESSIONS


MADE_WORSE = {
    "reordered": worsen.reorder,
    "duplicated": worsen.duplicate,
    "dropped": lambda p: worsen.drop(p, set(worsen.data_segments(p)[5::7])),
    "midstream": lambda p: worsen.midstream(p, 9),
    "snaplen": lambda p: worsen.snaplen(p, 120),
}


@pytest.mark.parametrize("how", sorted(MADE_WORSE))
def test_batches_hold_the_reference_rows_on_made_worse_copies(tmp_path, how):
    linktype, packets = worsen.read_pcap(worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap")
    path = worsen.write_pcap(tmp_path / f"{how}.pcap", linktype, MADE_WORSE[how](packets))
    expected = reference(path)
    assert columnar(path) == expected
    if how in ("dropped", "midstream", "snaplen"):
        assert any(row["truncated"] or row["fields"] for row in expected)


def test_batch_size_does_not_change_the_rows():
    path = worsen.CAPTURES / "rbfly-filter-4.0.pcap"
    whole = pa.Table.from_batches(list(frame_batches(str(path), ports=(5553,))))
    pieces = list(frame_batches(str(path), ports=(5553,), rows_per_batch=7))
    assert len(pieces) > 2 and all(b.num_rows <= 7 for b in pieces)
    assert pa.Table.from_batches(pieces).equals(whole)


def test_hot_frames_need_no_json_and_keep_their_fields_typed():
    rows = columnar(worsen.CAPTURES / "rstream-filter-4.0.pcap")
    hot = [r for r in rows if r["command"] in ("Publish", "Deliver", "Credit", "PublishConfirm",
                                               "Heartbeat") and not r["response"]]  # fmt: skip
    assert hot and all(r["fields"] is None for r in hot)
    deliver = next(r for r in rows if r["command"] == "Deliver")
    assert deliver["chunk_id"] is not None and deliver["num_entries"] >= 1
    assert deliver["crc_ok"] is True and deliver["record_count"] >= 1
    publish = next(r for r in rows if r["command"] == "Publish")
    assert publish["publishing_ids"] and publish["version"] == 2
    assert publish["record_count"] == len(publish["publishing_ids"])


def test_frames_table_is_the_batches_with_pandas_dtypes():
    path = worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap"
    table = frames_table(str(path))
    assert list(table.columns) == schema.column_names("frames")
    assert {name: str(dtype) for name, dtype in table.dtypes.items()} == {
        name: dtype if dtype != "string" else "string" for name, dtype in
        schema.pandas_dtypes("frames").items()}  # fmt: skip
    assert len(table) == len(reference(path))
    publish = table[table["command"] == "Publish"].iloc[0]
    assert list(publish["publishing_ids"]) == [int(i) for i in publish["publishing_ids"]]


def test_pcapng_gzip_and_rotated_sets_give_the_same_frames(tmp_path):
    """The batches of a pcapng, a gzip'd one, and a capture split into two files read as
    one, equal those of the plain pcap."""
    path = worsen.CAPTURES / "rstream-consume-credit-3.10.pcap"
    plain = frames_arrow(str(path)).to_pylist()
    pcapng = worsen.to_pcapng(path, tmp_path / "c.pcapng")
    assert frames_arrow(str(pcapng)).to_pylist() == plain
    gz = worsen.gzip_copy(pcapng, tmp_path / "c.pcapng.gz")
    assert frames_arrow(str(gz)).to_pylist() == plain
    linktype, packets = worsen.read_pcap(path)
    half = len(packets) // 2
    first = worsen.write_pcap(tmp_path / "a.pcap", linktype, packets[:half])
    second = worsen.write_pcap(tmp_path / "b.pcap", linktype, packets[half:])
    assert frames_arrow([str(first), str(second)]).to_pylist() == plain and len(plain) == 103


def test_the_helper_process_is_used_only_where_forking_is_safe():
    """By default (None) a helper is forked only in a process with no other thread: never
    under a notebook kernel's or a Spark worker's threads."""
    import subprocess
    import sys

    script = (
        "import threading\n"
        "from streamdissect.engine.dissect import Dissector\n"
        "alone = Dissector(helper_process=None).helper_process\n"
        "stop = threading.Event(); t = threading.Thread(target=stop.wait); t.start()\n"
        "shared = Dissector(helper_process=None).helper_process\n"
        "stop.set(); t.join()\n"
        "print(alone, shared, Dissector().helper_process)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout.split()  # fmt: skip
    assert out == ["True", "False", "False"]


def _deliver(version: int, chunk_id: int, data: bytes, crc: int | None = None,
             magic: int = 0x50, entries: int = 1) -> bytes:  # fmt: skip
    import zlib

    from test_bulk_engine import _frame

    from streamdissect.protocols.stream import osiris

    header = {"magic_version": magic, "chunk_type": 0, "num_entries": entries, "num_records": 1,
              "timestamp": 1_700_000_000_000, "epoch": 1, "chunk_id": chunk_id,
              "crc": zlib.crc32(data) if crc is None else crc, "data_length": len(data),
              "trailer_length": 0, "bloom_size": 0, "reserved": 0}  # fmt: skip
    prefix = struct.pack(">B", 4) + (struct.pack(">Q", chunk_id + 5) if version == 2 else b"")
    return _frame(0x0008, version, prefix + osiris.pack_header(header) + data)


def test_hot_frames_come_as_runs_and_odd_ones_as_records_in_their_place(tmp_path):
    """The bulk engine's columns mode: hot frames as HotFrames, and each odd one (a check the
    codec would fail, another version, a bad CRC) declined to the record path, in its place:
    the rows are the reference's, in the reference's order."""
    from test_bulk_engine import _frame, frames_capture

    from streamdissect.protocols.stream.hot import HotFrames

    def publish(pid, ids, word=5, version=1):
        body = b"".join(struct.pack(">QI", i, word) + b"hello"[:word] for i in ids)
        return _frame(0x0002, version, struct.pack(">Bi", pid, len(ids)) + body)

    data = struct.pack(">I", 3) + b"abc"
    frames = [
        publish(1, [1, 2, 3]), publish(1, [4]), publish(1, [9, 7]),  # ids in any order
        publish(1, [5], word=9),  # entry size and frame size disagree
        publish(2, [6], version=2),  # (v2: the codec's)
        _frame(0x0009, 1, struct.pack(">Bh", 3, 10)), _frame(0x0009, 2, struct.pack(">Bh", 3, 1)),
        _frame(0x0003, 1, struct.pack(">Bi2Q", 1, 2, 1, 2)), _frame(0x0003, 1, struct.pack(">Bi", 1, -1)),
        _frame(0x0017, 1, b""), _frame(0x0017, 1, b"\x00"),
        _deliver(1, 10, data), _deliver(2, 11, data), _deliver(2, 12, data, crc=1),
        _deliver(2, 13, data, magic=0x40), _deliver(1, 14, data, entries=2),
        _deliver(3, 15, data),
    ]  # fmt: skip
    path = frames_capture(tmp_path / "hot.pcap", frames)
    events = list(Dissector(columns=True, publish_messages=False).run(str(path)))
    runs = [e for e in events if isinstance(e, HotFrames)]
    records = [e.record for e in events if isinstance(e, FrameEvent)]
    assert sum(map(len, runs)) == 3 * 9 and len(records) == 3 * 8
    assert columnar(path) == reference(path)
    rows = [r for r in columnar(path) if r["command"] == "Deliver"]
    assert [r["crc_ok"] for r in rows[:3]] == [True, True, False]
    kept = [r for r in columnar(path, deliver_keep_limit=0) if r["command"] == "Deliver"]
    assert [r["crc_ok"] for r in kept[:3]] == [None, None, None]
    assert columnar(path, deliver_keep_limit=0) == reference(path, deliver_keep_limit=0)

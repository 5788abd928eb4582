"""The Spark job's tasks can run again (a retry after a lost executor) without changing what
they wrote: a part file is written whole or not at all, and the stitch stage reads the first
stage's parts as that stage wrote them, so running it twice writes what running it once did
(issue 28). The tasks are called here in this process, as Spark's workers call them."""

from __future__ import annotations

import dataclasses
import os

import pyarrow.parquet as pq
import pytest
import rotate
import worsen

from streamdissect.rotated.facts import PieceFacts
from streamdissect.rotated.stitch import plan
from streamdissect.spark import tasks
from streamdissect.spark.tasks import analyse_pieces, stitch_piece, visible_parts, write_whole


class Clock:
    """What a Spark accumulator offers the tasks."""

    value = 0.0

    def add(self, seconds: float) -> None:
        self.value += seconds


def parts(work: str) -> dict[str, list]:
    """Every visible part file under `work`, its rows."""
    found = {}
    for folder, _, _ in os.walk(work):
        for name in visible_parts(folder):
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                found[os.path.relpath(path, work)] = pq.read_table(path).to_pylist()
    return found


def first_stage(paths: list, work: str) -> tuple[dict, object]:
    """Stage 1 (every piece analysed, its parts written) and the plan of the set; with the
    frames table (`streamdissect spark --tables ...,frames`), whose stitch rewrites its parts
    (read from the part it rewrote, a retry changed them: this test failed so)."""
    options = {"work": work, "ports": (5552,), "heuristic": True, "frames": True,
               "clock": Clock(), "per_id": ()}  # fmt: skip
    found = analyse_pieces([(k, str(p)) for k, p in enumerate(paths)], options)
    pieces = [PieceFacts(str(p), None, None) for p in paths]
    for k, facts in found:
        pieces[k] = facts
    return options, plan(pieces)


def stitch_stage(paths: list, options: dict, the_plan) -> None:
    """Stage 2 as jobs._stitch runs it: each piece of a rotated set, in its own task."""
    light = dataclasses.replace(the_plan, anomalies=[], chains={
        key: dataclasses.replace(chain, frames=[]) for key, chain in the_plan.chains.items()})
    options = {**options, "buckets": 2}
    for members in the_plan.sets:
        if len(members) > 1:
            for k in members:
                stitch_piece(k, str(paths[k]), light, options)


@pytest.mark.parametrize("name", ["rstream-consume-credit-3.10", "rstream-slow-consumer-3.10"])
def test_the_stitch_stage_run_twice_writes_what_it_writes_once(name, tmp_path):
    pieces = rotate.cut(worsen.CAPTURES / f"{name}.pcap", 4, tmp_path / "pieces", offset=1)
    work = str(tmp_path / "work")
    options, the_plan = first_stage(pieces, work)
    assert the_plan.chains, "no connection across the cuts: nothing to stitch"
    stitch_stage(pieces, options, the_plan)
    once = parts(work)
    stitch_stage(pieces, options, the_plan)  # (every task again, as a retry runs it)
    assert parts(work) == once
    assert any("anomalies" in p or "connections" in p for p in once)


def test_a_write_killed_midway_leaves_no_part(tmp_path, monkeypatch):
    """The writer dies inside pyarrow's write: no part under its name (the hidden attempt is
    not read), and the retry writes it whole."""
    pieces = rotate.cut(worsen.CAPTURES / "rstream-consume-credit-3.10.pcap", 2, tmp_path / "p")
    table = pq.read_table(next(iter(_some_part(pieces, tmp_path))))
    where = str(tmp_path / "out" / "part-00000.parquet")
    os.makedirs(os.path.dirname(where))
    real = pq.write_table

    def dies(arrow, path, **kwargs):
        real(arrow.slice(0, 1), path)  # (half written, then the process is gone)
        raise SystemExit("killed")

    monkeypatch.setattr(pq, "write_table", dies)
    with pytest.raises(SystemExit):
        write_whole(table, where)
    assert not os.path.exists(where) and visible_parts(os.path.dirname(where)) == []
    monkeypatch.setattr(pq, "write_table", real)
    write_whole(table, where)
    assert pq.read_table(where).equals(table)
    assert visible_parts(os.path.dirname(where)) == ["part-00000.parquet"]


def _some_part(pieces: list, tmp_path) -> list[str]:
    work = str(tmp_path / "w")
    first_stage(pieces, work)
    return [os.path.join(work, "connections", n)
            for n in visible_parts(os.path.join(work, "connections"))]


def test_hidden_files_are_not_parts(tmp_path):
    for name in ("part-00001.parquet", ".part-00001.parquet.first", ".x.tmp", "_SUCCESS"):
        (tmp_path / name).write_bytes(b"")
    assert visible_parts(str(tmp_path)) == ["part-00001.parquet"]
    assert tasks.visible_parts(str(tmp_path / "missing")) == []

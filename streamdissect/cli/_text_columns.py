"""The `frames` text lines of a HotFrames run (the bulk engine's hot frames as columns),
written from its columns a command at a time: the bytes the text writer prints for each
frame's record (tests/test_frames_columns.py holds them equal), with no record and no dict.
Each command's line is a template made once by summary.fields_summary itself."""

from __future__ import annotations

import string
from functools import cache

import numpy as np

from streamdissect.cli._hot_fields import BODIES, CHUNK_COLUMN, CONSTANTS, column
from streamdissect.cli._jsonl_columns import id_lists
from streamdissect.protocols.stream import hot
from streamdissect.protocols.stream.hot import HotFrames
from streamdissect.protocols.stream.summary import (
    IDS_LISTED,
    IDS_SPAN,
    MOST_IDS_LISTED,
    fields_summary,
)

ARROWS = {"c2s": "→", "s2c": "←"}
# A frame's line: its number, seconds since the first event, side (SIDE: its connection and
# the arrow of its direction) and summary.
LINE_HEAD = "%6d %11.6f %s "
LINE = LINE_HEAD + "%s\n"
SIDE = "%s %s"
IDS = "ids"  # the template's slot for the publishing ids (with their space, or nothing)


def run_text(run: HotFrames, rows: np.ndarray, first_number: int, first_ns: int) -> str:
    """The lines of the frames `rows` (in order) of the run, the run's first frame being
    number `first_number` and the clock starting at `first_ns`."""
    sides = np.array([SIDE % (name, ARROWS[d]) for name in run.connections
                      for d in hot.DIRECTIONS], dtype=object)  # fmt: skip
    side = sides[run.connection * len(hot.DIRECTIONS) + run.direction]
    key = run.key[rows]
    committed = run.fields["committed_chunk_id"][1][rows]
    lines = np.empty(len(rows), dtype=object)
    for k in np.unique(key).tolist():
        for has_committed in (False, True) if k == hot.DELIVER_KEY else (False,):
            mine = np.flatnonzero((key == k) & (committed == has_committed)
                                  if k == hot.DELIVER_KEY else key == k)  # fmt: skip
            if not len(mine):
                continue
            template, names = _template(k, has_committed)
            frames = rows[mine]
            seconds = (run.ts_ns[frames] - first_ns) / 1e9
            values = [_values(run, frames, k, name) for name in names]
            lines[mine] = [template % v for v in zip(
                (frames + first_number).tolist(), seconds.tolist(), side[frames].tolist(),
                *values)]  # fmt: skip
    return "".join(lines.tolist())


def _values(run: HotFrames, rows: np.ndarray, key: int, name: str) -> list:
    if name == IDS:
        return _ids(run, rows)
    return column(run, rows, key, tuple(name.split("."))).values.tolist()


def _ids(run: HotFrames, rows: np.ndarray) -> list[str]:
    """Each frame's ids part: a space and summary.ids_summary's text, or nothing (none)."""
    counts = run.id_counts[rows]
    out = np.full(len(rows), "", dtype=object)
    listed = np.flatnonzero((counts > 0) & (counts <= MOST_IDS_LISTED))
    out[listed] = [" " + IDS_LISTED.format(ids) for ids in id_lists(run, rows[listed])]
    span = np.flatnonzero(counts > MOST_IDS_LISTED)
    if len(span):
        starts, many = run.id_starts[rows[span]], counts[span]
        out[span] = [" " + IDS_SPAN.format(first, last, count) for first, last, count in zip(
            run.id_values[starts].tolist(), run.id_values[starts + many - 1].tolist(),
            many.tolist())]  # fmt: skip
    return out.tolist()


class _Slot:
    """A field's value in a template: it prints as the slot `{name}`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __format__(self, spec: str) -> str:
        return "{" + self.name + "}"


@cache
def _template(key: int, has_committed: bool) -> tuple:
    """(the format of a line of command `key`, given the number, seconds, connection and
    arrow, and the values of `names`; the names of its slots, in order)."""
    fields: dict = {"key": key, "command": hot.COMMAND_OF[key], **CONSTANTS,
                    "version": _Slot("version"), "size": _Slot("size")}  # fmt: skip
    for name in BODIES[key]:
        fields[name] = _Slot(name)
    if "chunk" in fields:
        fields["chunk"] = {name: _Slot("chunk." + name) for name in CHUNK_COLUMN}
    if "committed_chunk_id" in fields and not has_committed:
        fields["committed_chunk_id"] = None
    summary = fields_summary(fields, hot.COMMAND_OF[key], ids_text=lambda ids: "{" + IDS + "}")
    summary = summary.replace(" {" + IDS + "}", "{" + IDS + "}")
    literal, names = [LINE_HEAD], []
    for text, name, _, _ in string.Formatter().parse(summary):
        literal.append(text.replace("%", "%%"))
        if name is not None:
            literal.append("%s")
            names.append(name)
    return "".join(literal) + "\n", tuple(names)

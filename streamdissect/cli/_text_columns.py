"""The `frames` text lines of a HotFrames run (the bulk engine's hot frames as columns),
written from its columns a group of alike frames at a time: the bytes the text writer prints
for each frame's record (tests/test_frames_columns.py holds them equal), with no record and
no dict. Each command's line is a template made once by summary.fields_summary itself; a
group's values that are the same for all its frames are written into its template once."""

from __future__ import annotations

import string
from functools import cache

import numpy as np

from streamdissect.cli._hot_fields import BODIES, CHUNK_COLUMN, CONSTANTS, column
from streamdissect.cli._jsonl_columns import int_list_format
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
HEAD = (("number", "%6d"), " ", ("seconds", "%11.6f"), " ", ("side", "%s"), " ")
LINE = "".join(p if p.__class__ is str else p[1] for p in HEAD) + "%s\n"
SIDE = "%s %s"
IDS = "ids"  # the summary template's slot for the publishing ids (with their space)
SPAN = MOST_IDS_LISTED + 1  # a group's number of ids shown: 0 to MOST_IDS_LISTED, or SPAN


def run_text(run: HotFrames, rows: np.ndarray, first_number: int, first_ns: int) -> str:
    """The lines of the frames `rows` (in order) of the run, the run's first frame being
    number `first_number` and the clock starting at `first_ns`."""
    counts = np.maximum(run.id_counts[rows], 0)
    shown = np.minimum(counts, SPAN)
    committed = run.fields["committed_chunk_id"][1][rows].astype(np.int64)
    group = (run.key[rows].astype(np.int64) << 4) | (committed << 3) | shown
    sides = np.array([SIDE % (name, ARROWS[d]) for name in run.connections
                      for d in hot.DIRECTIONS], dtype=object)  # fmt: skip
    side = sides[run.connection * len(hot.DIRECTIONS) + run.direction]
    lines = np.empty(len(rows), dtype=object)
    for g in np.unique(group).tolist():
        mine = np.flatnonzero(group == g)
        frames = rows[mine]
        head = {"number": frames + first_number, "seconds": (run.ts_ns[frames] - first_ns) / 1e9,
                "side": side[frames]}  # fmt: skip
        pieces: list = []
        for piece in _template(g >> 4, bool(g >> 3 & 1)):
            if piece.__class__ is str:
                pieces.append(piece)
            elif piece[0] == IDS:
                pieces += _ids(run, frames, g & 7)
            else:
                name, spec = piece
                values = head[name] if name in head else column(
                    run, frames, g >> 4, tuple(name.split("."))).values  # fmt: skip
                pieces.append((spec, values))
        lines[mine] = _formatted(pieces, len(frames))
    return "".join(lines.tolist())


def _ids(run: HotFrames, frames: np.ndarray, shown: int) -> list:
    """The pieces of the frames' ids part, each frame showing `shown` of them (SPAN: the
    first, the last and how many): a space and summary.ids_summary's text, or nothing."""
    if shown == 0:
        return []
    starts = run.id_starts[frames]
    if shown == SPAN:
        many = run.id_counts[frames]
        text = IDS_SPAN.format("%d", "%d", "%d")
        values = [run.id_values[starts], run.id_values[starts + many - 1], many]
    else:
        text = IDS_LISTED.format(int_list_format(shown))
        values = [run.id_values[starts + i] for i in range(shown)]
    literals = (" " + text).split("%d")
    pieces: list = [literals[0]]
    for values_i, literal in zip(values, literals[1:]):
        pieces += [("%d", values_i), literal]
    return pieces


def _formatted(pieces: list, n: int) -> list[str]:
    """The n lines of pieces (text, or (%-spec, a value per line)): a value the same on every
    line is written into the format once."""
    text, varying = [], []
    for piece in pieces:
        if piece.__class__ is str:
            text.append(piece.replace("%", "%%"))
            continue
        spec, values = piece
        if n == 1 or bool((values == values[0]).all()):
            text.append((spec % values[:1].tolist()[0]).replace("%", "%%"))
        else:
            text.append(spec)
            varying.append(values.tolist())
    template = "".join(text)
    if not varying:
        return [template % ()] * n
    return [template % values for values in zip(*varying)]


class _Slot:
    """A field's value in a template: it prints as the slot `{name}`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __format__(self, spec: str) -> str:
        return "{" + self.name + "}"


@cache
def _template(key: int, has_committed: bool) -> tuple:
    """A line of command `key` as pieces: text, and (name, %-spec) of each value (IDS: the
    publishing ids' part, if any)."""
    fields: dict = {"key": key, "command": hot.COMMAND_OF[key], **CONSTANTS,
                    "version": _Slot("version"), "size": _Slot("size")}  # fmt: skip
    for name in BODIES[key]:
        fields[name] = _Slot(name)
    if "chunk" in fields:
        fields["chunk"] = {name: _Slot("chunk." + name) for name in CHUNK_COLUMN}
    if "committed_chunk_id" in fields and not has_committed:
        fields["committed_chunk_id"] = None
    summary = fields_summary(fields, hot.COMMAND_OF[key], ids_text=lambda ids: "{" + IDS + "}")
    summary = summary.replace(" {" + IDS + "}", "{" + IDS + "}")  # (the ids bring their space)
    pieces: list = list(HEAD)
    for text, name, _, _ in string.Formatter().parse(summary):
        pieces.append(text)
        if name is not None:
            pieces.append((name, "%s"))
    return (*pieces, "\n")

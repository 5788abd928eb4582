"""The `frames --format jsonl` lines of a HotFrames (the bulk engine's hot frames as
columns), made a command at a time from its columns: the same bytes json.dumps writes for
each frame's dict (tests/test_frames_cli.py holds them equal), with no record and no dict.
"""

from __future__ import annotations

import json

import numpy as np

from streamdissect.cli._hot_fields import CHUNK_HEADER
from streamdissect.protocols.stream import hot
from streamdissect.protocols.stream.hot import HotFrames


def run_lines(run: HotFrames) -> str:
    """The run's jsonl lines, in its order."""
    n = len(run)
    key = run.key
    head = _heads(run)
    lines = np.empty(n, dtype=object)
    for k, body in ((hot.CREDIT_KEY, _credit), (hot.HEARTBEAT_KEY, None),
                    (hot.CONFIRM_KEY, _confirm), (hot.PUBLISH_KEY, _publish),
                    (hot.DELIVER_KEY, _deliver)):  # fmt: skip
        rows = np.flatnonzero(key == k)
        if not len(rows):
            continue
        heads = [head[i] for i in rows.tolist()]
        if body is None:
            lines[rows] = [h + "}\n" for h in heads]
        else:
            lines[rows] = [h + b + "}\n" for h, b in zip(heads, body(run, rows))]
    return "".join(lines.tolist())


def _heads(run: HotFrames) -> list[str]:
    """Each frame's line up to its own fields (the common columns of every frame)."""
    names = [json.dumps(name) for name in run.connections]
    commands = {k: hot.COMMAND_OF[k] for k in np.unique(run.key).tolist()}
    return [
        f'{{"ts_ns": {ts}, "connection": {names[c]}, "direction": "{hot.DIRECTIONS[d]}", '
        f'"stream_offset": {offset}, "key": {k}, "command": "{commands[k]}", '
        f'"response": false, "version": {v}, "size": {size}, "correlation_id": null, '
        f'"code": null, "code_name": null, "truncated": false'
        for ts, c, d, offset, k, v, size in zip(
            run.ts_ns.tolist(), run.connection.tolist(), run.direction.tolist(),
            run.stream_offset.tolist(), run.key.tolist(), run.version.tolist(),
            run.size.tolist())
    ]  # fmt: skip


def _field(run: HotFrames, name: str, rows: np.ndarray) -> list[int]:
    return run.fields[name][0][rows].tolist()


def id_lists(run: HotFrames, rows: np.ndarray) -> list[str]:
    """Each frame's publishing ids as a JSON list (as a Python list of ints prints, too),
    the frames with as many ids at a time."""
    counts = np.maximum(run.id_counts[rows], 0)
    out = np.empty(len(rows), dtype=object)
    for count in np.unique(counts).tolist():
        mine = np.flatnonzero(counts == count)
        ids = run.id_values[run.id_starts[rows[mine]][:, None] + np.arange(count)].tolist()
        template = int_list_format(count)
        out[mine] = [template % tuple(frame) for frame in ids]
    return out.tolist()


def int_list_format(count: int) -> str:
    """The %-format of a list of `count` ints as JSON (and a Python list) writes it."""
    return "[" + ", ".join(("%d",) * count) + "]"


def _credit(run: HotFrames, rows: np.ndarray) -> list[str]:
    return [f', "subscription_id": {sid}, "credit": {credit}' for sid, credit in
            zip(_field(run, "subscription_id", rows), _field(run, "credit", rows))]  # fmt: skip


def _confirm(run: HotFrames, rows: np.ndarray) -> list[str]:
    return [f', "publisher_id": {pid}, "publishing_ids": {ids}' for pid, ids in
            zip(_field(run, "publisher_id", rows), id_lists(run, rows))]  # fmt: skip


def _publish(run: HotFrames, rows: np.ndarray) -> list[str]:
    return [f', "publisher_id": {pid}, "publishing_ids": {ids}, "record_count": {count}'
            for pid, ids, count in zip(_field(run, "publisher_id", rows), id_lists(run, rows),
                                       _field(run, "record_count", rows))]  # fmt: skip


def _deliver(run: HotFrames, rows: np.ndarray) -> list[str]:
    committed, has = run.fields["committed_chunk_id"]
    committed = [c if h else "null" for c, h in zip(committed[rows].tolist(),
                                                     has[rows].tolist())]  # fmt: skip
    crc = [("null", "false", "true")[c + 1] for c in run.crc[rows].tolist()]
    header = zip(*(_field(run, field, rows) for _, field in CHUNK_HEADER))
    template = ", ".join(f'"{name}": {{}}' for name, _ in CHUNK_HEADER)
    return [
        f', "subscription_id": {sid}, "committed_chunk_id": {c}, '
        f'"chunk": {{{template.format(*values)}}}, "record_count": {values[3]}, '
        f'"entry_count": {values[2]}, "crc_ok": {ok}'
        for sid, c, values, ok in zip(_field(run, "subscription_id", rows), committed, header,
                                      crc)
    ]  # fmt: skip

"""What the collectors share for taking hot frames as columns (HotFrames, their `on_hot`).

Each collector takes a HotFrames in its own `on_hot`: grouped with numpy per connection and
direction, per second, per publisher or per subscription and applied at once, or frame by
frame, as its per-frame methods, when the run is shorter than SHORT_RUN (numpy's fixed cost
a call is more than a few frames' Python). tests/test_analysis_runs.py holds every table
made from HotFrames equal to the one made from records, both ways.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamdissect.protocols.stream.hot import DIRECTIONS, HotFrames

U63 = (1 << 63) - 1
SHORT_RUN = 64  # a run shorter than this goes frame by frame (read as hot_input.SHORT_RUN)


def is_short(run: HotFrames) -> bool:
    return len(run) < SHORT_RUN


def groups(group: np.ndarray, first_seen: bool = False) -> list[int]:
    """The distinct values of a small non-negative key (connection and id numbers), in
    order, or in the order they first appear; counted, not sorted."""
    found = np.flatnonzero(np.bincount(group))
    if first_seen and len(found) > 1:
        first = [int(np.argmax(group == g)) for g in found.tolist()]
        found = found[np.argsort(first)]
    return found.tolist()


def frames_of(run: HotFrames, keys: tuple[int, ...] | None, fields: tuple[str, ...] = ()
              ) -> list[tuple]:  # fmt: skip
    """The frames of `run` whose key is one of `keys` (None: all), one by one, as tuples
    (frame number, key, ts, connection, direction, size, then the values of `fields`): what
    a collector takes frame by frame of a short run."""
    rows = np.arange(len(run)) if keys is None else np.flatnonzero(np.isin(run.key, keys))
    if not len(rows):
        return []
    names, sides = run.connections, DIRECTIONS
    columns = [rows.tolist(), run.key[rows].tolist(), run.ts_ns[rows].tolist(),
               [names[n] for n in run.connection[rows].tolist()],
               [sides[d] for d in run.direction[rows].tolist()],
               run.size[rows].tolist()]  # fmt: skip
    columns += [run.fields[name][0][rows].tolist() for name in fields]
    return list(zip(*columns))


def cells(values: Any, none: Any) -> list:
    """A column's values as Python objects, None where `none` says."""
    items = values.tolist() if isinstance(values, np.ndarray) else list(values)
    if none is None or not np.any(none):
        return items
    return [None if n else v for v, n in zip(items, np.asarray(none).tolist())]

"""Values as a report prints them: table cells, wall-clock times, durations."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from typing import Any

import numpy as np


def missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        import pandas as pd

        return bool(pd.isna(value))
    except (TypeError, ValueError):  # (a list, say)
        return False


def cell(value: Any) -> str:
    """A table cell: '–' for a missing value, thousands separated, ms to three places."""
    if missing(value):
        return "–"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)):
        return f"{value:,.3f}"
    if isinstance(value, (int, np.integer)):
        return f"{value:,}"
    return str(value)


def wall(ns: Any, tz: tzinfo | None = None) -> str:
    """Capture time in ns as '2026-11-22 00:44:11.144356' (UTC unless `tz`)."""
    if missing(ns):
        return "–"
    seconds, rest = divmod(int(ns), 1_000_000_000)
    when = datetime.fromtimestamp(seconds, tz or UTC)
    return f"{when:%Y-%m-%d %H:%M:%S}.{rest // 1000:06d}"


def duration(ms: Any) -> str:
    """'850 ms', '12.4 s', '3 min 20 s'."""
    if missing(ms):
        return "–"
    ms = float(ms)
    if ms < 1_000:
        return f"{ms:,.1f} ms"
    if ms < 60_000:
        return f"{ms / 1000:,.2f} s"
    minutes, seconds = divmod(ms / 1000, 60)
    return f"{int(minutes)} min {seconds:.0f} s"


def plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (words or word + 's')}"

"""A progress bar on stderr for long reads, only when a person is watching a terminal."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

PROGRESS_MIN_BYTES = 32 * 1024 * 1024  # smaller files finish before a bar is worth drawing


def progress_bar(paths: Iterable[str]):
    """A tqdm bar counting bytes read (update it with on_read), or None."""
    if not sys.stderr.isatty():
        return None
    total = sum(os.path.getsize(p) for p in paths if os.path.isfile(p))
    if total < PROGRESS_MIN_BYTES:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, file=sys.stderr, leave=False)

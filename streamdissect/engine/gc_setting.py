"""The cyclic garbage collector's pace during a bulk run, and the caller's pace back after it.

A run allocates millions of records and events that make no reference cycles. With Python's
default thresholds (700, 10, 10) the collector walks the young objects every 700 allocations
and everything every ~7 million: on the RocketMQ benchmark capture that is about 40% more CPU
than the thresholds below (benchmarks/README.md). The thresholds are the process's, so a
library call (a notebook's analyze(), a Spark worker's task) sets them for its duration only
and puts the caller's back afterwards, even when it raises: the command line, the library
and the Spark tasks run with this one setting.

    with bulk_gc():
        ...

`bulk_gc_steps(iterator)`: the same for a generator, each step alone (between the steps the
caller's code runs with the caller's setting). Whether the collector is enabled is never
changed: a caller that disabled it keeps it disabled.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

# Young objects collected every 200,000 allocations net (not 700); the older generations'
# ratios unchanged. (At 10,000 a RocketMQ block's own records and events, alive until the
# block is handed on, passed the threshold: 69 young and 6 older collections walked them,
# 13 % of the 1x benchmark capture's CPU; at 200,000 one collection a run. Garbage
# cycles, rare in a run, wait at most that many objects.)
BULK_THRESHOLDS = (200_000, 10, 10)

_lock = threading.Lock()
_runs = 0  # runs under way in this process (threads, nested calls): the first one saves
_saved: tuple[int, ...] | None = None  # the caller's thresholds, while a run is under way

Item = TypeVar("Item")


@contextlib.contextmanager
def bulk_gc() -> Iterator[None]:
    """The collector at the bulk pace while the block runs; the thresholds found before the
    first of the runs under way put back when the last one ends (unless something else
    changed them meanwhile: then they are left as it set them)."""
    global _runs, _saved
    with _lock:
        if _runs == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(*BULK_THRESHOLDS)
        _runs += 1
    try:
        yield
    finally:
        with _lock:
            _runs -= 1
            if _runs == 0:
                if gc.get_threshold() == BULK_THRESHOLDS and _saved is not None:
                    gc.set_threshold(*_saved)
                _saved = None


def bulk_gc_steps(items: Iterable[Item]) -> Iterator[Item]:
    """`items`, each one made under bulk_gc(); the caller's code between them runs with its
    own setting."""
    iterator = iter(items)
    try:
        while True:
            with bulk_gc():
                try:
                    item = next(iterator)
                except StopIteration:
                    return
            yield item
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:  # (a generator left early: its cleanup now, not at collection)
            with bulk_gc():
                close()

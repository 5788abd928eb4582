"""A protocol's frames table as Arrow record batches: the currency of bulk work.

    for batch in frame_batches("capture.pcap"):   # pyarrow.RecordBatch, schema.FRAMES
        ...

The protocol's frames table builder (Protocol.frame_columns; the Stream's in
protocols/stream/frame_table.py) takes the frame events, and its fast path's column events
(the Stream's HotFrames) in their place, and makes the batches.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from streamdissect.engine.dissect import Anomaly, Dissector, FrameEvent
from streamdissect.engine.gc_setting import bulk_gc_steps
from streamdissect.protocols import registry
from streamdissect.tables import schema
from streamdissect.tables.arrays import ROWS_PER_BATCH, typed_array

# (typed_array: protocols/stream/analysis/columns.py takes it from here until it goes)
__all__ = ["ROWS_PER_BATCH", "frame_batches", "frames_arrow", "typed_array"]


def frame_batches(
    paths: str | Sequence[str],
    ports: Iterable[int] | Mapping[str, Iterable[int]] | None = None,
    heuristic: bool = True,
    max_frame: int | None = None,
    show_secrets: bool = False,
    rows_per_batch: int = ROWS_PER_BATCH,
    protocol: str | None = None,
    **options: Any,
) -> Iterator[Any]:
    """The frames of a capture (several paths: one capture in time order) as
    pyarrow.RecordBatch with the schema of `protocol`'s frames table (default: the first
    registered, the Stream: `schema.arrow_schema("frames")`); only that protocol's
    connections are dissected. Options go to Dissector (`helper_process`: a helper forked
    on another CPU, by default only when this process has no other thread: a script, not a
    notebook kernel). Each batch is made with the collector at the bulk pace
    (engine.gc_setting); the caller's code between batches runs at its own."""
    return bulk_gc_steps(_frame_batches(paths, ports, heuristic, max_frame, show_secrets,
                                        rows_per_batch, protocol, options))  # fmt: skip


def _frame_batches(paths: str | Sequence[str], ports: Any, heuristic: bool,
                   max_frame: int | None, show_secrets: bool, rows_per_batch: int,
                   protocol: str | None, options: dict) -> Iterator[Any]:  # fmt: skip
    chosen = registry.protocol(protocol)
    options.setdefault("publish_messages", False)  # (the table has no message bodies)
    options.setdefault("helper_process", None)  # (only where forking is safe: Dissector)
    options.setdefault("columns", True)  # (a fast path's hot frames come as columns)
    dissector = Dissector(ports, heuristic, max_frame, protocols=(chosen.name,), **options)
    builder = chosen.frame_columns(show_secrets)
    for event in dissector.run(paths):
        cls = event.__class__
        if cls is FrameEvent:
            builder.add(event)
        elif cls is not Anomaly:  # the fast path's frames as columns
            builder.add_run(event)
        else:
            continue
        if builder.rows >= rows_per_batch:
            yield from builder.batches(rows_per_batch)
    if builder.rows:
        yield from builder.batches(rows_per_batch)


def frames_arrow(paths: str | Sequence[str], **options: Any) -> Any:
    """All the frames of a capture as one pyarrow.Table."""
    import pyarrow as pa

    table = registry.protocol(options.get("protocol")).frames_table
    return pa.Table.from_batches(list(frame_batches(paths, **options)),
                                 schema=schema.arrow_schema(table))  # fmt: skip

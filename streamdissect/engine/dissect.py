"""The pipeline: capture files -> TCP segments -> connections -> frames -> records.

    for event in dissect("capture.pcap"):
        if isinstance(event, FrameEvent): ...   # event.record is the decoded frame
        else: ...                               # an Anomaly

`Dissector` does the same and keeps the connections and anomalies tables for after the run.
Both engines live below this module (engine/): the streaming one, the reference, packet by
packet (engine.stream), and the bulk one for a plain pcap (engine.bulk); they share the
state of engine.state and import nothing of this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from itertools import chain
from typing import Any

from streamdissect.capture.sources import open_sources
from streamdissect.engine import stream
from streamdissect.engine.anomalies import Anomaly
from streamdissect.engine.bulk import BulkCapture
from streamdissect.engine.state import (
    ConnectionSummary,
    DissectionState,
    FrameEvent,
    StreamConnection,
    endpoint_text,
)

__all__ = ["Anomaly", "ConnectionSummary", "Dissector", "FrameEvent", "StreamConnection",
           "dissect", "endpoint_text"]  # fmt: skip


class Dissector(DissectionState):
    # --- the run ---------------------------------------------------------------------

    def run(self, paths: str | Iterable[str]) -> Iterator[FrameEvent | Anomaly]:
        """Frames and anomalies in capture order; several paths are one capture merged
        in time order (a rotated set). CaptureError if a file cannot be read at all."""
        if isinstance(paths, str):
            paths = [paths]
        paths = list(paths)
        if self.engine != "stream" and paths and self.fast_path is not None:
            self._bulk = True  # (set first: anomalies told on opening wait for their turn)
            sources = open_sources(paths, self._file_reporter)
            if sources is not None:
                self.start_flows()
                return chain.from_iterable(BulkCapture(self, sources).batches())
            self._bulk = False
        return stream.run(self, paths)  # (opens every file now: errors raise here)


def dissect(
    paths: str | Iterable[str],
    ports: Iterable[int] | Mapping[str, Iterable[int]] | None = None,
    heuristic: bool = True,
    max_frame: int | None = None,
    **options: Any,
) -> Iterator[FrameEvent | Anomaly]:
    """Frame events and anomalies of a capture (several paths: one capture in time order).
    `ports`: see engine.state.DissectionState (None: each protocol's default ports).

    Raises CaptureError at once when a file is not a readable capture."""
    return Dissector(ports, heuristic, max_frame, **options).run(paths)

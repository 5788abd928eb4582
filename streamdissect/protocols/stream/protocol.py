"""RabbitMQ Stream behind the protocol seam (protocols.base.Protocol): the one object the
registry lists for this package."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from functools import cached_property
from typing import Any

from streamdissect.framing.framer import Emit, Framer, Report
from streamdissect.protocols.base import FramerOptions, Protocol
from streamdissect.protocols.stream.framing import StreamFramer, looks_like_stream, sent_by_server
from streamdissect.protocols.stream.publish import id_run
from streamdissect.protocols.stream.records import record_class
from streamdissect.protocols.view import DEFAULT_MAX_BODY

TUNE_KEY = 0x0014
PUBLISH_KEY = 0x0002
PUBLISH_CLASS = record_class("Publish")


class StreamProtocol(Protocol):
    name = "stream"
    title = "RabbitMQ Stream"
    ports = (5552,)
    framer_class = StreamFramer
    frames_table = "frames"
    connections_table = "connections"

    @property
    def fast_path(self) -> Any:
        """The bulk walk's hot frames as columns (HotFrames; engine/bulk.py makes it per run)."""
        from streamdissect.protocols.stream.fast_path import StreamFastPath

        return StreamFastPath

    def looks_like(self, data: bytes) -> bool | None:
        return looks_like_stream(data)

    def sent_by_server(self, data: bytes) -> bool:
        return sent_by_server(data)

    def framer(self, emit: Emit, report: Report, options: FramerOptions,
               framers: list[Framer], framer_class: Callable[..., Framer] | None = None,
               ) -> Framer:  # fmt: skip
        """The base's framer, whose records go through two Stream rules first: without
        `publish_messages` a Publish keeps its ids and counts, not its messages (ids that go
        up one by one become a `range`); a Tune's frame max holds for both directions."""
        drop_messages = not options.publish_messages

        def stream_emit(offset: int, ts_ns: int, record: Any) -> None:
            if drop_messages and record.key == PUBLISH_KEY and record.__class__ is PUBLISH_CLASS:
                record.messages = None
                record.publishing_ids = id_run(record.publishing_ids)
            emit(offset, ts_ns, record)
            if record.key == TUNE_KEY and getattr(record, "frame_max", None):
                for framer in framers:  # the limit holds both ways
                    framer.negotiated_frame_max(record.frame_max)

        # What the bulk walk needs to emit a record that is neither a Publish nor a Tune
        # itself (the same count and event, one call less per frame).
        stream_emit.lane = getattr(emit, "lane", None)  # type: ignore[attr-defined]
        return super().framer(stream_emit, report, options, framers, framer_class)

    def pairing(self, record: Any) -> tuple[Hashable, bool] | None:
        """A call carries a correlation id, its response the same one (and the response
        bit). Tune, which has none, is paired by the latency analysis' own rule: the server's
        offer, then the client's reply."""
        correlation_id = getattr(record, "correlation_id", None)
        if correlation_id is None:
            return None
        return correlation_id, bool(record.response)

    @property
    def tables(self) -> dict[str, tuple]:
        from streamdissect.protocols.stream.tables import TABLES

        return TABLES

    def frame_columns(self, show_secrets: bool = False) -> Any:
        from streamdissect.protocols.stream.frame_table import FrameColumns

        return FrameColumns(show_secrets)

    def replay_schema(self) -> Any:
        """Its replay table is its frames table (frame_columns)."""
        from streamdissect.protocols.stream.tables import FRAMES
        from streamdissect.tables.columns import arrow_schema_of

        return arrow_schema_of(FRAMES)

    def replay_events(self, table: Any) -> Any:
        from streamdissect.protocols.stream.frame_events import frame_events

        return frame_events(table)

    def analysis(self, *, at_once_ms: float | None = None, report_only: bool = False,
                 tables: Any = None) -> Any:  # fmt: skip
        """The Stream's collector set (analysis/collectors.py); `at_once_ms` None: the credit
        analysis' own default."""
        from streamdissect.protocols.stream.analysis.collectors import Collectors
        from streamdissect.protocols.stream.analysis.credit import AT_ONCE_MS

        return Collectors.made(AT_ONCE_MS if at_once_ms is None else at_once_ms,
                               report_only, tables)  # fmt: skip

    def filter_containers(self) -> frozenset[str]:
        from streamdissect.protocols.stream.spec import container_fields

        return container_fields()

    @property
    def message_fields(self) -> frozenset[str]:  # type: ignore[override]
        from streamdissect.protocols.stream.messages import MESSAGE_FIELDS

        return MESSAGE_FIELDS

    def message_reader(self, max_body: int | None = DEFAULT_MAX_BODY,
                       bodies: bool = True) -> Any:  # fmt: skip
        """Publish and Deliver messages (messages.MessageRows)."""
        from streamdissect.protocols.stream.messages import MessageRows

        return MessageRows(max_body, bodies)

    def frame_view(self, record: Any, show_secrets: bool = False,
                   max_body: int | None = DEFAULT_MAX_BODY, bodies: bool = True,
                   ) -> tuple[str, str]:  # fmt: skip
        """The header, the command's fields, a Deliver's chunk and entries, each message's
        AMQP 1.0 sections (verbose.py)."""
        return self._views.frame_view(record, show_secrets, max_body, bodies)

    @cached_property
    def _views(self) -> Any:  # (verbose.py, imported at the first -V frame, not at each)
        from streamdissect.protocols.stream import verbose

        return verbose


STREAM = StreamProtocol()

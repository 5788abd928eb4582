"""RocketMQ remoting behind the protocol seam (protocols.base.Protocol): the one object a
registry line would list for this package (`ROCKETMQ`).

It gives the engine what it needs to find and frame RocketMQ connections (ports 9876, the
name server, and 10911, the broker; the heuristic; the framer) and pairs a response with
its request by `opaque` and the response bit of `flag`; its frames table is
`rocketmq_frames` (tables.py, frame_table.py: `frame_batches(paths, protocol="rocketmq")`);
its analyses are analysis/ (calls and latency, errors, sends, pulls, offsets, clients, broker
registrations).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from functools import cached_property
from typing import Any

from streamdissect.framing.framer import Emit, Framer, Report
from streamdissect.protocols.base import FramerOptions, Protocol
from streamdissect.protocols.view import DEFAULT_MAX_BODY

# (framing, codec and records are imported at the first RocketMQ connection or record, not
# with the registry: a capture of the Stream alone never needs them)


class RocketMQProtocol(Protocol):
    name = "rocketmq"
    title = "RocketMQ remoting"
    ports = (9876, 10911)
    frames_table = "rocketmq_frames"
    connections_table = "rocketmq_connections"

    @property
    def report_sections(self) -> tuple:  # (sections.py is read when asked for)
        from streamdissect.protocols.rocketmq.sections import REPORT_SECTIONS

        return REPORT_SECTIONS

    @cached_property
    def framer_class(self) -> type[Framer]:  # type: ignore[override]
        from streamdissect.protocols.rocketmq.framing import RocketMQFramer

        return RocketMQFramer

    @cached_property
    def plain_walk(self) -> Any:  # type: ignore[override]  (the bulk engine: JSON headers
        # read a block at a time)
        from streamdissect.protocols.rocketmq.plain_walk import RocketMQPlainWalk

        return RocketMQPlainWalk

    @cached_property
    def _framing(self) -> Any:
        from streamdissect.protocols.rocketmq import framing

        return framing

    @cached_property
    def _command_class(self) -> type:
        from streamdissect.protocols.rocketmq.records import RemotingCommand

        return RemotingCommand

    def looks_like(self, data: bytes) -> bool | None:
        return self._framing.looks_like_rocketmq(data)

    def framer(self, emit: Emit, report: Report, options: FramerOptions,
               framers: list[Framer], framer_class: Callable[..., Framer] | None = None,
               ) -> Framer:  # fmt: skip
        """The base's framer, whose records name the call they answer: a direction's
        requests are remembered by opaque, and a response of the other direction gets its
        request's code (`request_code`; None when the request was not seen)."""
        command_class = self._command_class

        def named_emit(offset: int, ts_ns: int, record: Any) -> None:
            if record.__class__ is command_class and not framer.naming_deferred:
                framer.name(record)
            emit(offset, ts_ns, record)

        framer = super().framer(named_emit, report, options, framers, framer_class)
        framer.connection_framers = framers
        framer.lane = getattr(emit, "lane", None)
        return framer

    def sent_by_server(self, data: bytes) -> bool:
        return self._framing.sent_by_server(data)

    def pairing(self, record: Any) -> tuple[Hashable, bool] | None:
        """A response carries its request's opaque and the response bit; a oneway request
        gets no response, and a frame with no header read is no call."""
        if record.__class__ is not self._command_class:
            return None
        return record.opaque, record.response

    def frame_line(self, record: Any, show_secrets: bool = False) -> str:
        from streamdissect.protocols.rocketmq.summary import frame_summary

        return frame_summary(record)

    def frame_fields(self, record: Any, show_secrets: bool = False,
                     payloads: bool = False) -> dict[str, Any]:  # fmt: skip
        from streamdissect.protocols.rocketmq.summary import frame_fields

        return frame_fields(record, payloads)

    def filter_fields(self) -> frozenset[str]:
        from streamdissect.protocols.rocketmq.summary import FIELD_NAMES

        return FIELD_NAMES

    def filter_containers(self) -> frozenset[str]:
        from streamdissect.protocols.rocketmq.summary import CONTAINER_FIELDS

        return CONTAINER_FIELDS

    @property
    def message_fields(self) -> frozenset[str]:  # type: ignore[override]
        from streamdissect.protocols.rocketmq.message_view import MESSAGE_FIELDS

        return MESSAGE_FIELDS

    def message_reader(self, max_body: int | None = DEFAULT_MAX_BODY,
                       bodies: bool = True) -> Any:  # fmt: skip
        """The messages of sends, batches and pull responses (message_view.py)."""
        from streamdissect.protocols.rocketmq.message_view import RocketMQMessages

        return RocketMQMessages(max_body, bodies)

    def frame_view(self, record: Any, show_secrets: bool = False,
                   max_body: int | None = DEFAULT_MAX_BODY, bodies: bool = True,
                   ) -> tuple[str, str]:  # fmt: skip
        """The header and each message, its body inflated (verbose.py)."""
        return self._views.frame_view(record, max_body, bodies)

    @cached_property
    def _views(self) -> Any:  # (verbose.py, imported at the first -V frame, not at each)
        from streamdissect.protocols.rocketmq import verbose

        return verbose

    @property
    def tables(self) -> dict[str, tuple]:
        from streamdissect.protocols.rocketmq.tables import TABLES

        return TABLES

    def frame_columns(self, show_secrets: bool = False) -> Any:
        from streamdissect.protocols.rocketmq.frame_table import FrameRows

        return FrameRows(show_secrets)

    analysed_per_server = True  # (its latency, offsets and clients are per server)

    def replay_columns(self) -> Any:
        from streamdissect.protocols.rocketmq.replay import ReplayRows

        return ReplayRows()

    def replay_schema(self) -> Any:
        from streamdissect.protocols.rocketmq.replay import replay_schema

        return replay_schema()

    def replay_events(self, table: Any) -> Any:
        from streamdissect.protocols.rocketmq.replay import replay_events

        return replay_events(table)

    def analysis(self, *, at_once_ms: float | None = None, report_only: bool = False,
                 tables: Any = None) -> Any:  # fmt: skip
        """RocketMQ's collector set (analysis/collectors.py); `report_only`: no row a call
        (the requests table; the latency table is made all the same); `at_once_ms` changes
        nothing here (RocketMQ has no credit)."""
        from streamdissect.protocols.rocketmq.analysis.collectors import Collectors

        return Collectors.made(report_only, tables)


ROCKETMQ = RocketMQProtocol()

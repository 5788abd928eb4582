"""The seam between the pipeline and a protocol: what one protocol package gives, through
one object listed in protocols/registry.py.

The pipeline below the faces (capture, tcp, framing, engine, tables, analysis) never imports
a protocol package by name: per connection, the engine asks the registry which protocol it
carries (by server port, then by each protocol's heuristic on a direction's first bytes) and
frames both directions with that protocol's framer; the tables and the analyses take the
protocol's tables, frames table and analyses from the same object.

A protocol package imports the layers below it (capture, tcp, framing: the Framer it
subclasses) and the building blocks of the layers above that name no protocol
(tables.columns, tables.arrays, analysis.fields, analysis.percentiles, analysis.compact),
never the registry nor what imports it: the parts above the engine (tables, frames table,
analyses) are imported when they are asked for.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Hashable
from typing import Any, ClassVar, NamedTuple

from streamdissect.framing.framer import Emit, Framer, Report
from streamdissect.protocols.view import DEFAULT_MAX_BODY
from streamdissect.slotted import Frozen


class FramerOptions(Frozen):
    """What the dissector's options say about framing (engine.state.DissectionState)."""

    __slots__ = field_names = ("max_frame", "fixed_max_frame", "deliver_keep_limit",
                               "publish_messages")  # fmt: skip
    max_frame: int  # a size field above it is garbage
    fixed_max_frame: bool  # max_frame was given: it, not the negotiated max, limits
    deliver_keep_limit: int | None  # frames `heads_only` names are kept as heads above it
    publish_messages: bool  # False: records may leave out message bodies nothing reads

    def __init__(self, max_frame: int, fixed_max_frame: bool, deliver_keep_limit: int | None,
                 publish_messages: bool) -> None:  # fmt: skip
        self._set(max_frame=max_frame, fixed_max_frame=fixed_max_frame,
                  deliver_keep_limit=deliver_keep_limit, publish_messages=publish_messages)  # fmt: skip


class ReportSection(NamedTuple):
    """One of a protocol's tables as a section of the `analyze` report (shown when the
    capture gives it rows)."""

    title: str
    table: str
    columns: tuple[str, ...] | None = None  # the text's columns (None: all); JSON has all
    one_row_an_event: bool = False  # the text shows its first rows only (as the stalls)


class MessageReader:
    """A protocol's messages for one run of `frames` or the messages table, read from the
    frame events fed in order (Protocol.message_reader): what `-V` in jsonl, the message
    fields of `-Y`, `--messages` and the messages table show. This one finds none (a
    protocol without messages); a protocol's subclass gives its own."""

    def __init__(self, max_body: int | None = DEFAULT_MAX_BODY, bodies: bool = True) -> None:
        self.max_body, self.bodies = max_body, bodies

    def messages(self, event: Any) -> list:
        """A frame event's messages, in order (none for most frames); a frame may also say
        something the later ones' rows need (the Stream: the stream a publisher writes)."""
        return []

    def fields(self, message: Any, max_body: int | None) -> dict[str, Any]:
        """A message as the JSON-able dict `-Y` names under `message.` (its body cut at
        `max_body` bytes, None: whole; left out unless `bodies`)."""
        raise NotImplementedError

    def row(self, event: Any, message: Any, frame: int) -> dict[str, Any]:
        """A `--messages` line: the frame's place (`frame`: its number, as `frames` counts
        them) and the message's fields, its body cut at max_body."""
        raise NotImplementedError

    def line(self, row: dict[str, Any]) -> str:
        """A row as `--messages` writes it in text (after the number, time, connection)."""
        raise NotImplementedError

    def table_row(self, row: dict[str, Any]) -> dict[str, Any]:
        """A row as the messages table has it (tables/messages.py; columns left out are
        null)."""
        raise NotImplementedError


class Protocol:
    """One protocol: a subclass sets the class attributes and the methods that raise here."""

    name: ClassVar[str]  # short, lower case: option values (`protocols=("stream",)`)
    title: ClassVar[str]  # for people: "RabbitMQ Stream"
    ports: ClassVar[tuple[int, ...]]  # default server ports
    framer_class: ClassVar[type[Framer]]  # a direction's framer (a framing.framer.Framer)
    frames_table: ClassVar[str]  # the name, among `tables`, of its one-row-a-frame table
    # the name, among `tables`, of its one-row-a-connection table (frames each way)
    connections_table: ClassVar[str | None] = None
    # the names, among `tables`, of those made only when asked for (not in every export)
    tables_on_request: ClassVar[frozenset[str]] = frozenset()
    # Its fast path, or None: then a capture with its connections goes through the exact
    # packet-by-packet engine (engine.stream) only. The Stream's is its hot frames as columns
    # (protocols/stream/hot.py: HotFrames, what consumers take in place of FrameEvents) and
    # the block engine's frame walk (engine/bulk.py). See docs/architecture.md.
    fast_path: ClassVar[Any] = None
    # Without a fast path, its help in the bulk engine's plain walk of its connections, or
    # None: a class made once a run, of the dissection state (`columns="analysis"`: it may
    # give light records for its analyses), with framing.walk.PlainFrames's interface (whose
    # `direction` may take frames off the walk: `deferred`, read together in `finish`). It
    # changes no event: the RocketMQ one decodes a direction's JSON headers together.
    plain_walk: ClassVar[Any] = None
    # Its tables the `analyze` report shows beside the default protocol's sections, each
    # only when it has rows (the default protocol's own report is the CLI's).
    report_sections: ClassVar[tuple[ReportSection, ...]] = ()

    def looks_like(self, data: bytes) -> bool | None:
        """Heuristic for a connection on a port no protocol claims: do these first bytes of
        a direction (up to engine.state.CLASSIFY_BYTES) start this protocol's frames? None
        when there are too few bytes to tell."""
        raise NotImplementedError

    def sent_by_server(self, data: bytes) -> bool:
        """Whether a direction whose first bytes `looks_like` accepted is the server's (asked
        when the capture shows no SYN to tell)."""
        raise NotImplementedError

    def framer(self, emit: Emit, report: Report, options: FramerOptions,
               framers: list[Framer], framer_class: Callable[..., Framer] | None = None,
               ) -> Framer:  # fmt: skip
        """A direction's framer: `emit(offset, ts_ns, record)` takes each record, `report`
        each anomaly; `framers` is the connection's list of both framers (filled once both
        are made: a frame may change what its peer accepts, as the Stream's Tune does);
        `framer_class`, when given, is made instead of `framer_class` (a subclass of it
        that keeps more of each frame)."""
        return (framer_class or self.framer_class)(
            emit, report, options.max_frame, options.deliver_keep_limit,
            options.fixed_max_frame)  # fmt: skip

    def pairing(self, record: Any) -> tuple[Hashable, bool] | None:
        """How a call's response finds its request on the same connection: (the key both
        carry, whether this record is the response), or None for a frame that is no call."""
        raise NotImplementedError

    @property
    def tables(self) -> dict[str, tuple]:
        """Its tables: name -> columns (tables.columns.Column), in output order; names are
        unique among the registered protocols."""
        raise NotImplementedError

    def frame_columns(self, show_secrets: bool = False) -> Any:
        """A builder of its frames table as Arrow batches: `add(frame_event)`,
        `add_run(columns)` (its fast path's events that are not FrameEvents), `rows`,
        `batches(most)` (tables.batches.frame_batches)."""
        raise NotImplementedError

    # Whether the Spark job makes its tables per server (every frame of a server's
    # connections analysed in one task, in capture order), not per file: a protocol whose
    # tables are per server more than per connection (RocketMQ: latency, offsets, clients).
    analysed_per_server: ClassVar[bool] = False

    def replay_columns(self) -> Any:
        """A builder (`add(frame_event)`, `rows`, `batches(most)`) of its replay table: its
        frames as a table that `replay_events` turns back into the frame events its analyses
        take, with `ts_ns`, `connection`, `direction` and `stream_offset` columns (a rotated
        set's connections analysed from their frames in every piece: rotated/, the Spark
        job). By default its frames table."""
        return self.frame_columns()

    def replay_schema(self) -> Any:
        """The replay table's Arrow schema."""
        raise NotImplementedError

    def replay_events(self, table: Any) -> Any:
        """The frame events of a replay table (a pyarrow.Table), in its row order."""
        raise NotImplementedError

    def frame_line(self, record: Any, show_secrets: bool = False) -> str:
        """A frame's text line (after the number, time and connection) for `frames`."""
        raise NotImplementedError

    def frame_fields(self, record: Any, show_secrets: bool = False,
                     payloads: bool = False) -> dict[str, Any]:  # fmt: skip
        """A frame's own fields in its jsonl line (after ts_ns, connection, direction,
        stream_offset); `payloads`: with its raw payload fields."""
        raise NotImplementedError

    def filter_fields(self) -> frozenset[str]:
        """Every field name frame_fields may give (what a display filter may name)."""
        raise NotImplementedError

    def filter_containers(self) -> frozenset[str]:
        """Those of its filter fields whose values hold fields of their own (maps, lists,
        structs): a display filter may name a path under them (`ext.topic`), not under the
        others, which hold one value each (`flag.response` is an error, not a filter that
        selects nothing)."""
        raise NotImplementedError

    # What `-Y` may name after `message.` in its messages (MessageReader.fields' keys)
    message_fields: ClassVar[frozenset[str]] = frozenset()

    def message_reader(self, max_body: int | None = DEFAULT_MAX_BODY,
                       bodies: bool = True) -> MessageReader:  # fmt: skip
        """Its messages for one run (MessageReader): bodies cut at `max_body` bytes in rows,
        left out everywhere unless `bodies`."""
        return MessageReader(max_body, bodies)

    def frame_view(self, record: Any, show_secrets: bool = False,
                   max_body: int | None = DEFAULT_MAX_BODY, bodies: bool = True,
                   ) -> tuple[str, str]:  # fmt: skip
        """`frames -V`: a frame's text line and the tree of its fields under it (lines
        indented four spaces a level, each ended by a newline), its messages' bodies cut at
        `max_body` bytes and left out unless `bodies`. This one: its jsonl fields, one a
        line (no bodies)."""
        fields = self.frame_fields(record, show_secrets, False)
        below = "".join(f"    {name}: {json.dumps(value, default=str, ensure_ascii=False)}\n"
                        for name, value in fields.items())  # fmt: skip
        return self.frame_line(record, show_secrets), below

    def analysis(self, **options: Any) -> Any:
        """Its analyses for one run: the collector set the analysis driver feeds every frame
        event of its connections and reads the tables' rows from."""
        raise NotImplementedError(f"{self.title}: no analyses given to the registry")

    def __repr__(self) -> str:
        return f"<protocol {self.name}: {self.title}, ports {self.ports}>"

    def __reduce__(self) -> str | tuple:
        """Pickled by reference (Spark's tasks, the multiprocessing helper): unpickling gives
        the object its module holds (`ROCKETMQ`), never a copy, and none of what it made
        lazily (cached framer classes, modules) is in the pickle. An object no module
        holds by name is made anew from its class (a protocol keeps no state of its own)."""
        for name, value in vars(sys.modules[type(self).__module__]).items():
            if value is self:
                return name
        return type(self), ()

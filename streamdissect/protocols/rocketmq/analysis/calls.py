"""RocketMQ calls: a request paired with the response of the same opaque on the same
connection, in the other direction (`rocketmq_requests`), and their latency per request code,
server and direction (`rocketmq_latency`, in the shape of the Stream's SRT table).

The other collectors take a response's request from here: the call collector sees every
frame first, and `answered` is then the request the current response answers (an Asked:
what the collectors read of its event and record; None for a request, or a response whose
request the capture does not hold), and `asked` the current request (an Asked; None for a
response or a oneway request). A collector that keeps something per open call keys it by the
Asked's `key`; a PerCall collector keeps its rows on the Asked itself (`kept`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from streamdissect.analysis.percentiles import ExactSample, summarize_sample
from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.analysis.rows import RowShape, RowTable, shared
from streamdissect.protocols.rocketmq.framing import MAX_OPEN_CALLS
from streamdissect.protocols.rocketmq.tables import REQUESTS

_OTHER = {"c2s": "s2c", "s2c": "c2s"}
RESPONSE_FLAG, ONEWAY_FLAG = spec.RESPONSE_FLAG, spec.ONEWAY_FLAG
R = RowShape(REQUESTS)
_asked_row = R.maker("connection", "server", "direction", "opaque", "request_code", "request_name",
                     "topic", "request_ts_ns", "status")  # fmt: skip
_orphan_row = R.maker("connection", "server", "direction", "opaque", "request_code",
                      "request_name", "response_ts_ns", "code", "code_name", "remark", "status")  # fmt: skip


@lru_cache(maxsize=4096)
def server_of(connection: str) -> str:
    """The server's ip:port of a connection id `client-server[#n]` (one string a connection,
    not one a row: a row a send keeps it)."""
    return connection.split("-", 1)[-1].split("#", 1)[0]


class Asked:
    """An open call's request as the collectors read it when it is answered (`answered`):
    its event's connection, direction and time, and its record's code, opaque, flag and the
    header fields its response's collectors read (`fields`: a pull's or an offset query's
    topic, group and queue, for offsets.py; `topic`, for errors.py); not the frame's header
    dicts, body and messages (a capture of one direction keeps MAX_OPEN_CALLS of these). It
    stands for the event and, as its `record`, for the record."""

    __slots__ = ("code", "connection", "direction", "flag", "group", "keeper", "kept", "key",
                 "opaque", "queue_id", "topic", "ts_ns")  # fmt: skip

    def __init__(self, ev: Any, code: int, opaque: int, flag: int, topic: Any, group: Any,
                 queue_id: Any) -> None:  # fmt: skip
        """`ev`: the request's event; its record's code, opaque, flag and header fields
        topic, consumerGroup and queueId (None: not in the header)."""
        self.connection, self.direction, self.ts_ns = ev.connection, ev.direction, ev.ts_ns
        self.code, self.opaque, self.flag = code, opaque, flag
        # the call's key, as every collector keeps its open calls by: the request's
        # connection, direction and opaque (its response's connection, other direction and
        # opaque)
        self.key = (ev.connection, ev.direction, opaque)
        # (three slots, not a dict a call: made when `fields` is read)
        self.topic, self.group, self.queue_id = topic, group, queue_id
        # the (index, row) a PerCall collector (`keeper`, set with it) made for this call,
        # awaiting its response
        self.kept: list | None = None

    @property
    def record(self) -> Asked:
        return self

    @property
    def oneway(self) -> bool:
        return bool(self.flag & ONEWAY_FLAG)

    @property
    def fields(self) -> dict:
        """The header fields kept, by their names (None: not in the header)."""
        return {"topic": self.topic, "consumerGroup": self.group, "queueId": self.queue_id}


class OpenCalls:
    """What the call collector keeps per open call, bounded as the framer bounds its
    open calls: past MAX_OPEN_CALLS the oldest is forgotten (its row stays unanswered)."""

    def __init__(self) -> None:
        self._open: dict[tuple, Any] = {}

    def opened(self, key: tuple, value: Any) -> Any:
        """Keep `value` for the call of this key (Asked.key); what was kept for an open
        call of the same key."""
        open_calls = self._open
        previous = open_calls.pop(key, None)
        open_calls[key] = value
        if len(open_calls) > MAX_OPEN_CALLS:
            del open_calls[next(iter(open_calls))]
        return previous

    def closed(self, key: tuple) -> Any:
        """What was kept for the call of this key (None: nothing)."""
        return self._open.pop(key, None)


class PerCall:
    """A collector whose rows are made at a request and completed at its response: `add_row`
    appends one (a list of its `shape`, its request's connection, server and time in it),
    `keep` notes the request's rows (unless it is oneway); a response of a kept call goes to
    `answered(request event, its rows, response event)`. The rows are kept in a RowTable
    (`rows()`: the table).

    A call's rows wait on its Asked (`kept`), not in a dict of this collector's own: they are
    answered when the call collector pairs the call, as before they were only then too (a
    call it forgot past MAX_OPEN_CALLS, or whose opaque a later request reused, leaves them
    unanswered; they are written as the table's window passes them)."""

    def __init__(self, calls: Any) -> None:
        self._calls = calls
        self._table = RowTable(len(self.shape.columns))
        self._made: list[tuple[int, Any]] = []  # (index, row) of the request's rows so far

    shape: RowShape  # its table's rows

    def add_row(self, row: list) -> None:
        """`row` (a list of `shape`) as a row of the current request, appended."""
        self._made.append((self._table.begin(row), row))

    def keep(self, request_event: Any) -> None:
        """The rows add_row appended for this request await its response (a oneway one's are
        complete)."""
        made, self._made = self._made, []
        if request_event.record.flag & ONEWAY_FLAG:
            self._done(made)
            return
        asked = self._calls.asked
        asked.kept, asked.keeper = made, self

    def _done(self, made: Any) -> None:
        completed = self._table.completed
        for index, row in made:
            completed(index, row)

    def on_response(self, ev: Any) -> None:
        request = self._calls.answered
        if request is None:
            return
        kept = request.kept
        # (its own rows only: the framer names a response by the request it holds under the
        # opaque, as this pairs it, so by the call's code; should they differ, a collector
        # must not take another's rows)
        if kept is not None and request.keeper is self:
            request.kept = None
            self.answered(request, [row for _, row in kept], ev)
            self._done(kept)

    def answered(self, request_event: Any, rows: list, response_event: Any) -> None:
        raise NotImplementedError

    def rows(self) -> Any:
        """The table's rows (CompactRows of tuples in its column order)."""
        return self._table.rows()


def answer(row: list, shape: RowShape, request_event: Any, response_event: Any) -> None:
    """A row's response columns (of its shape) from its response, and the latency."""
    rec = response_event.record
    row[shape.response_ts_ns] = ts_ns = response_event.ts_ns
    row[shape.latency_ms] = (ts_ns - request_event.ts_ns) / 1e6
    row[shape.code] = rec.code
    row[shape.remark] = shared(rec.remark)
    if shape.names_codes:
        row[shape.code_name] = rec.code_name


class CallCollector:
    """Pairs calls; counts them and keeps their latencies per (request code, server,
    direction) for the latency table, and, with `keep_rows`, a row a call (the requests
    table: the analyze report, which shows only the latency table, leaves it out)."""

    def __init__(self, keep_rows: bool = True) -> None:
        self._table = RowTable(len(REQUESTS))
        self.answered: Asked | None = None  # the request the current response answers
        self.asked: Asked | None = None  # the current request, when it awaits a response
        self._keep_rows = keep_rows
        # (row or None, its index, request (Asked), group, sample) of each open call
        self._pending = OpenCalls()
        # (code, server, direction) -> (its counts, its answered calls' latencies: memory a
        # distinct latency, not a call)
        self._groups: dict[tuple, tuple[dict, ExactSample]] = {}
        # (code, connection, direction) -> its group (of its server): a request's, found
        # without naming its server
        self._of_connection: dict[tuple, tuple[dict, ExactSample]] = {}

    def _group(self, code: int | None, connection: str, direction: str) -> tuple:
        """(counts, latency sample) of the calls of this code, server and direction."""
        at = (code, connection, direction)
        found = self._of_connection.get(at)
        if found is None:
            found = self._of_connection[at] = self._server_group(code, connection, direction)
        return found

    def _server_group(self, code: int | None, connection: str, direction: str) -> tuple:
        key = (code, server_of(connection), direction)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = ({
                "request_code": code, "request_name": None if code is None else
                spec.request_name(code), "server": key[1], "direction": direction,
                "calls": 0, "answered": 0, "open_requests": 0, "orphan_responses": 0,
                "duplicate_ids": 0, "oneway": 0}, ExactSample())  # fmt: skip
        return group

    def on_frame(self, ev: Any) -> None:
        rec = ev.record
        flag = rec.flag
        if flag & RESPONSE_FLAG:
            self.asked = None
            self._on_response(ev, rec)
            return
        fields = rec.fields
        self.request(ev, rec.code, rec.opaque, flag, fields.get("topic"),
                     fields.get("consumerGroup"), fields.get("queueId"))  # fmt: skip

    def on_hot_send(self, ev: Any) -> None:
        """A send request as a light record (hot.HotSend: no consumer group)."""
        rec = ev.record
        self.request(ev, rec.code, rec.opaque, rec.flag, rec.topic, None, rec.queue_id)

    def request(self, ev: Any, code: int, opaque: int, flag: int, topic: Any, consumer_group: Any,
                queue_id: Any) -> None:  # fmt: skip
        """A request (its event, and what is read of its record: see Asked)."""
        self.answered = self.asked = None
        oneway = flag & ONEWAY_FLAG
        connection, direction = ev.connection, ev.direction
        found = self._of_connection.get((code, connection, direction))  # (_group, inline)
        group, sample = found if found is not None else self._group(code, connection, direction)
        group["oneway" if oneway else "calls"] += 1
        row = index = None
        if self._keep_rows:
            row = _asked_row(ev.connection, group["server"], ev.direction, opaque, code,
                             group["request_name"], topic, ev.ts_ns,
                             "oneway" if oneway else "open")  # fmt: skip
            index = self._table.begin(row, complete=bool(oneway))
        if oneway:
            return
        self.asked = asked = Asked(ev, code, opaque, flag, topic, consumer_group, queue_id)
        previous = self._pending.opened(asked.key, (row, index, asked, group, sample))
        if previous is not None:
            previous[3]["duplicate_ids"] += 1
            if previous[0] is not None:
                previous[0][R.status] = "duplicate"
                self._table.completed(previous[1], previous[0])

    def _on_response(self, ev: Any, rec: Any) -> None:
        key = (ev.connection, _OTHER.get(ev.direction, ev.direction), rec.opaque)
        found = self._pending.closed(key)
        if found is None:
            self.answered = None
            group = self._group(rec.request_code, ev.connection, key[1])[0]
            group["orphan_responses"] += 1
            if self._keep_rows:
                row = _orphan_row(ev.connection, group["server"], key[1], rec.opaque,
                                  rec.request_code, group["request_name"], ev.ts_ns, rec.code,
                                  rec.code_name, rec.remark, "orphan_response")  # fmt: skip
                self._table.begin(row, complete=True)
            return
        row, index, asked, group, sample = found
        self.answered = asked
        group["answered"] += 1
        sample.append((ev.ts_ns - asked.ts_ns) / 1e6)
        if row is not None:
            answer(row, R, asked, ev)
            row[R.status] = "answered"
            self._table.completed(index, row)

    @property
    def keeps_rows(self) -> bool:
        """Whether it keeps a row a call (the requests table)."""
        return self._keep_rows

    def rows(self) -> Any:
        """The requests table's rows (CompactRows of tuples in its column order)."""
        return self._table.rows()

    def summary(self) -> list[dict]:
        """One row per (request code, server, direction), in order of first appearance."""
        out = []
        for group, sample in self._groups.values():
            row = dict(group, open_requests=group["calls"] - group["answered"])
            row.update(summarize_sample(sample))
            out.append(row)
        return out

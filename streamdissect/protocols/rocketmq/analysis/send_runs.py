"""Runs of hot sends and their answers taken by the collectors a run at a time.

The analyze report (no row a call: `report_only`, every collector fed) reads most of a
capture's frames as light send requests (hot.HotSend) and their responses (hot.HotAnswer,
named by a send's code). One at a time, each went to the call, connection, sends (and, for
an error, errors) collectors' methods: ~24 Python calls a send and its response.
`Collectors` gathers a run of them (no other command of RocketMQ between) and gives it to
`take_run`, which does what those methods do, in the same order, frame by frame in one
loop: the call paired by (connection, opaque) in the call collector's OpenCalls (bounded by
MAX_OPEN_CALLS, a reused opaque counted as a duplicate, a response with no open call an
orphan), its counts and latency, the connection's counts, the send's row begun and
answered in the sends' RowTable. What is unusual for a row (a response answering rows of
another request than a light send's, an error's code) goes to the methods themselves.

The per-frame methods stay the reference: tests/test_rocketmq_send_runs.py holds every
table to theirs on random sequences (duplicates, reused opaques, orphans, errors, the bound
made small), and the three-way tests on the recorded captures.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from streamdissect.protocols.rocketmq import native, spec
from streamdissect.protocols.rocketmq.analysis import calls as calls_module
from streamdissect.protocols.rocketmq.analysis.calls import _OTHER, Asked, server_of
from streamdissect.protocols.rocketmq.analysis.rows import shared
from streamdissect.protocols.rocketmq.analysis.sends import _HOT_STATUS, S, _message_row
from streamdissect.protocols.rocketmq.hot import SEND_V2_CODE, HotSend

_SEND_OK = spec.SEND_STATUS[0]
_NAME = HotSend.code_name
# a send row's columns its answer sets (calls.answer and SendCollector.answered; the table
# names no response code: S.names_codes is False)
_TS, _LATENCY, _CODE, _REMARK, _STATUS, _QUEUE, _QUEUE_OFFSET, _OFFSET_ID = (
    S.response_ts_ns, S.latency_ms, S.code, S.remark, S.status, S.queue_id, S.queue_offset,
    S.offset_msg_id)  # fmt: skip
assert not S.names_codes


def take_run(c: Any, run: list) -> None:
    """The events of `run` (HotSend requests, HotAnswer responses to sends; a Collectors'
    `c`, every collector fed, no row a call) as the collectors take them one at a time.

    A send answered within the run is paired here (`paired`), without an Asked or an entry
    in the call collector's open calls, where no bound can be reached meanwhile: the open
    calls no more than MAX_OPEN_CALLS with every send of the run added, the sends' row
    window within RowTable.WINDOW (else the run goes frame by frame, `one_at_a_time`). Its
    sends still open at the end are then opened there in their order, after the calls
    open before (as one at a time leaves them); the rows begun and completed go to the
    RowTable at once (add_run), the latencies to their samples (exact: any order). The
    loop over the frames is compiled when the RocketMQ reader is loaded (native.py:
    `send_run`, this module's `_frames` in C), what is unusual in it (an error's code, an
    answer to no open call, to rows that are not one light send's) left to `_Unusual`."""
    (calls, sends, open_calls, table, room, _, of_connection, group_of, seen_of, unusual, begun,
     left, done, latencies) = c.run_parts  # (looked up once: `parts`)
    if len(open_calls) + len(run) > calls_module.MAX_OPEN_CALLS:
        settle(c)
        c.one_at_a_time(run)
        return
    if not room(len(begun) + len(run)):  # (the rows held and the run's within the window)
        settle(c)
        if not room(len(run)):
            c.one_at_a_time(run)
            return
    paired: dict = {}  # key -> (request event, row index, row, group, sample) of a send
    frames = _frames if native.loaded is None else native.loaded.send_run
    # (a row's index: the table's length and its place in `begun`, the rows held with it)
    frames(run, (open_calls, of_connection, group_of, seen_of, len(table), begun, done, paired,
                 latencies, server_of, _message_row, unusual, sends, HotSend, _CONSTANTS,
                 left))  # fmt: skip
    for key, (request, index, row, group, sample) in paired.items():  # (still open)
        asked = _asked(request)
        asked.kept, asked.keeper = [(index, row)], sends
        open_calls[key] = (None, None, asked, group, sample)
        left.append(index)
    # (what a response's collectors read of the call collector: the next command sets it)
    calls.asked = calls.answered = None


def settle(c: Any) -> None:
    """The rows and latencies of the runs taken since the last settle given to the sends'
    RowTable (add_run) and the latencies' samples: before anything else reads or changes
    them (any command but a light pull or its answer, which read neither: pull_path.py,
    and the end), or when the table's window could pass WINDOW."""
    p = c.run_parts
    begun, left, done, latencies = p.begun, p.left, p.done, p.latencies
    if begun or left or done:
        left.sort()
        p.add_run(begun, left, done)
        begun.clear()
        left.clear()
        done.clear()
    if latencies:
        for sample, lags in latencies.items():
            sample.extend(lags)
        latencies.clear()


class RunParts(NamedTuple):
    """What `take_run` reads of a Collectors a run, looked up once (the collectors' state
    objects are made with them and never replaced), and what the runs taken hold until
    `settle` (the last four)."""

    calls: Any
    sends: Any
    open_calls: dict  # (OpenCalls.opened and closed)
    table: Any  # the sends' RowTable
    room: Any  # its room()
    add_run: Any  # its add_run()
    of_connection: dict
    group_of: Any
    seen_of: dict
    unusual: Any  # (_Unusual)
    begun: list  # the rows begun, in order
    left: list  # indices of those left open (replaced by a send of their key, or still
    # open at a run's end)
    done: list  # (index, row) of rows begun before a run completed in it, in order
    latencies: dict  # sample -> the runs' latencies of it


def parts(c: Any) -> RunParts:
    """The RunParts of a Collectors' `c`."""
    calls, sends = c.calls, c.sends
    table = sends._table
    return RunParts(calls, sends, calls._pending._open, table, table.room, table.add_run,
                    calls._of_connection, calls._group, c.connections._seen, _Unusual(c),
                    [], [], [], {})  # fmt: skip


# What the compiled loop is given besides the state: the send's code and name, a light
# send's status, SEND_OK, the columns a SEND_OK's answer sets in its row, in this order, and
# a send row's length and where _message_row puts each of its values (the loop makes it)
_CONSTANTS = (SEND_V2_CODE, _NAME, _HOT_STATUS, _SEND_OK,
              (_TS, _LATENCY, _CODE, _REMARK, _STATUS, _QUEUE, _QUEUE_OFFSET, _OFFSET_ID),
              _message_row.width, _message_row.at)  # fmt: skip


class _Unusual:
    """What the run's loop leaves to Python (either loop: the compiled one calls these)."""

    __slots__ = ("c",)

    def __init__(self, c: Any) -> None:
        self.c = c

    def orphan(self, ev: Any, other: str) -> None:
        """A response to no open call: counted, and an error's code to the errors."""
        rec = ev.record
        self.c.calls._group(rec.request_code, ev.connection, other)[0]["orphan_responses"] += 1
        if rec.code:
            self.c.calls.answered = None
            self.c.errors.on_response(ev)

    def error(self, ev: Any, asked: Any, request: Any) -> None:
        """An error's code of a paired call, to the errors (which read the call's Asked)."""
        self.c.calls.answered = asked or _asked(request)
        self.c.errors.on_response(ev)

    def answered(self, ev: Any, asked: Any, request: Any, kept: list) -> None:
        """Rows answered that are not one light send's answered by a SEND_OK."""
        self.c.sends.answered(asked or _asked(request), [row for _, row in kept], ev)


def _frames(run: list, state: tuple) -> None:
    """The run's loop (compiled: _native.send_run): the collectors' per-frame work."""
    (open_calls, of_connection, group_of, seen_of, base, begun, done, paired, latencies,
     server_of, message_row, unusual, sends, send_class, _, left) = state  # fmt: skip
    for ev in run:
        rec = ev.record
        connection, direction, ts_ns = ev.connection, ev.direction, ev.ts_ns
        seen = seen_of.get(connection)  # (ConnectionCollector.on_frame)
        if seen is None:
            seen = seen_of[connection] = {
                "requests_c2s": 0, "requests_s2c": 0, "oneway": 0, "responses": 0,
                "first_command_ns": ts_ns}  # fmt: skip
        seen["last_command_ns"] = ts_ns
        if rec.__class__ is send_class:  # (never oneway)
            # CallCollector.request: its group's count; a call open under its key replaced
            found = of_connection.get((SEND_V2_CODE, connection, direction))
            group, sample = found if found is not None else group_of(
                SEND_V2_CODE, connection, direction)  # fmt: skip
            group["calls"] += 1
            opaque = rec.opaque
            key = (connection, direction, opaque)
            previous = paired.pop(key, None)
            if previous is not None:
                left.append(previous[1])  # (its row never answered)
            else:
                previous = open_calls.pop(key, None)
            if previous is not None:
                previous[3]["duplicate_ids"] += 1
            seen["requests_" + direction] += 1
            # SendCollector.on_hot_send
            wire = rec.wire
            row = message_row(connection, server_of(connection), ts_ns, opaque, _NAME, 0,
                              _HOT_STATUS, rec.group, rec.topic, rec.queue_id, rec.msg_id,
                              rec.tags, rec.keys, False, wire, wire)  # fmt: skip
            paired[key] = (ev, base + len(begun), row, group, sample)
            begun.append(row)
            continue
        # CallCollector._on_response
        seen["responses"] += 1
        other = _OTHER.get(direction, direction)
        key = (connection, other, rec.opaque)
        code = rec.code
        found = paired.pop(key, None)
        if found is not None:  # (a send of the run: its row, complete after this, not in done)
            request, index, row, group, sample = found
            kept = [(index, row)]
            asked = None
        else:
            found = open_calls.pop(key, None)
            if found is None:
                unusual.orphan(ev, other)
                continue
            _, _, asked, group, sample = found
            request = asked
            kept = asked.kept  # (PerCall.on_response: the sends' own rows only)
            if kept is not None and asked.keeper is sends:
                asked.kept = None
            else:
                kept = None
        group["answered"] += 1
        lags = latencies.get(sample)
        if lags is None:
            lags = latencies[sample] = []
        lags.append((ts_ns - request.ts_ns) / 1e6)
        if code:
            unusual.error(ev, asked, request)
        if kept is None:
            continue
        if code or len(kept) != 1:
            unusual.answered(ev, asked, request, kept)
        else:  # (calls.answer and SendCollector.answered for one row of a SEND_OK)
            ((index, row),) = kept
            row[_TS] = ts_ns
            row[_LATENCY] = (ts_ns - request.ts_ns) / 1e6
            row[_CODE] = 0
            row[_REMARK] = shared(rec.remark)
            row[_STATUS] = _SEND_OK
            queue_id, queue_offset, msg_ids = rec.queue_id, rec.queue_offset, rec.msg_id
            if queue_id is not None:
                row[_QUEUE] = queue_id
            if queue_offset is not None:
                row[_QUEUE_OFFSET] = queue_offset
            if msg_ids:
                first = msg_ids.split(",", 1)[0]
                if first:
                    row[_OFFSET_ID] = first
        if asked is not None:
            done += kept


def _asked(request: Any) -> Asked:
    """A light send's Asked (CallCollector.request's), from its event."""
    rec = request.record
    return Asked(request, SEND_V2_CODE, rec.opaque, 0, rec.topic, None, rec.queue_id)

"""Light pulls and their answers taken by the collectors in one step each.

The analyze report (no row a call: `report_only`, every collector fed) reads a consumer's
PULL_MESSAGE requests light (hot.HotPull) and their usual answers (hot.HotPulled: code 0,
named by the pull's code). One at a time, each went through `Collectors.command` to the
call, connection, pulls' and offsets' collectors' methods: ~20 Python calls and a dict of
the call's header fields a pull and its answer. `bound` makes the two handlers that do what
those methods do, in the same order, with the collectors' state looked up once: the call
opened in the call collector's OpenCalls (bounded by MAX_OPEN_CALLS, a reused opaque counted
as a duplicate) with the pull's row on its Asked, the answer paired by (connection,
opaque) (an orphan counted), its counts and latency, the connection's counts, the row
answered in the pulls' RowTable, the queue's max offset. What is unusual (a commit offset
carried, an answer of another code or named by another request's code) goes to the
methods themselves.

The per-frame methods stay the reference: tests/test_rocketmq_pull_path.py holds every
table to theirs on random sequences (duplicates, reused opaques, orphans, long polls,
commits, the bound made small), and tests/test_rocketmq_hot.py's three-way tests on the
recorded captures.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.analysis import calls as calls_module
from streamdissect.protocols.rocketmq.analysis.calls import _OTHER, Asked
from streamdissect.protocols.rocketmq.analysis.pulls import P, _pull_row
from streamdissect.protocols.rocketmq.analysis.rows import shared

_PULL, _SUSPEND, _COMMIT = spec.PULL_CODE, spec.PULL_SUSPEND, spec.PULL_COMMIT_OFFSET
_OK_NAME = spec.response_name(0)  # (a HotPulled's code_name: its code is 0)
# a pull row's columns its answer sets (calls.answer and PullCollector.answered)
_TS, _LATENCY, _CODE, _REMARK, _CODE_NAME, _MESSAGES, _BYTES, _NEXT, _MIN, _MAX, _BROKER = (
    P.response_ts_ns, P.latency_ms, P.code, P.remark, P.code_name, P.messages, P.bytes,
    P.next_begin_offset, P.min_offset, P.max_offset, P.suggested_broker_id)  # fmt: skip
_LONG_POLL, _HELD = P.long_poll, P.held_ms


def bound(c: Any) -> tuple[Callable, Callable]:
    """(on_pull, on_pulled): a Collectors' `c` (every collector fed, no row a call) handlers
    of a light pull request's event and of a light pull answer's, each after the run of
    sends gathered before it is taken (Collectors.on_command)."""
    calls, connections, pulls, offsets = c.calls, c.connections, c.pulls, c.offsets
    of_connection, group_of, seen_of = calls._of_connection, calls._group, connections._seen
    open_calls = calls._pending._open  # (OpenCalls.opened and closed)
    begin, completed = pulls._table.begin, pulls._table.completed
    max_of, offset_row = offsets._max, offsets._row

    def on_pull(ev: Any) -> None:
        """A HotPull: CallCollector.on_frame, ConnectionCollector.on_frame,
        PullCollector.on_request, OffsetCollector.on_commit (a pull is never oneway)."""
        if c._run:
            c.take_run()
        rec = ev.record
        fields = rec.fields
        get = fields.get
        connection, direction, ts_ns, opaque = ev.connection, ev.direction, ev.ts_ns, rec.opaque
        found = of_connection.get((_PULL, connection, direction))
        group, sample = found if found is not None else group_of(_PULL, connection, direction)
        group["calls"] += 1
        topic, consumer_group = get("topic"), get("consumerGroup")
        asked = Asked(ev, _PULL, opaque, 0, topic, consumer_group, get("queueId"))
        calls.answered, calls.asked = None, asked
        key = asked.key
        previous = open_calls.pop(key, None)
        open_calls[key] = (None, None, asked, group, sample)
        if len(open_calls) > calls_module.MAX_OPEN_CALLS:
            del open_calls[next(iter(open_calls))]
        if previous is not None:
            previous[3]["duplicate_ids"] += 1
        seen = seen_of.get(connection)
        if seen is None:
            seen = seen_of[connection] = {
                "requests_c2s": 0, "requests_s2c": 0, "oneway": 0, "responses": 0,
                "first_command_ns": ts_ns}  # fmt: skip
        seen["requests_" + direction] += 1
        seen["last_command_ns"] = ts_ns
        sys_flag = get("sysFlag") or 0
        row = _pull_row(connection, group["server"], ts_ns, opaque, shared(consumer_group),
                        shared(topic), asked.queue_id, get("queueOffset"), get("maxMsgNums"),
                        bool(sys_flag & _SUSPEND), get("suspendTimeoutMillis"))  # fmt: skip
        asked.kept, asked.keeper = [(begin(row), row)], pulls
        if sys_flag & _COMMIT:
            offsets.on_commit(ev)

    def on_pulled(ev: Any) -> None:
        """A HotPulled: CallCollector.on_frame, ConnectionCollector.on_frame,
        PullCollector.on_response, OffsetCollector.on_max_offset (an answer of another code,
        or named by another request's, as a command)."""
        rec = ev.record
        if rec.code or rec.request_code != _PULL:
            c.on_command(ev)
            return
        if c._run:
            c.take_run()
        connection, direction, ts_ns = ev.connection, ev.direction, ev.ts_ns
        other = _OTHER.get(direction, direction)
        found = open_calls.pop((connection, other, rec.opaque), None)
        seen = seen_of.get(connection)
        if seen is None:
            seen = seen_of[connection] = {
                "requests_c2s": 0, "requests_s2c": 0, "oneway": 0, "responses": 0,
                "first_command_ns": ts_ns}  # fmt: skip
        seen["responses"] += 1
        seen["last_command_ns"] = ts_ns
        calls.asked = None
        if found is None:
            calls.answered = None
            group_of(_PULL, connection, other)[0]["orphan_responses"] += 1
            return
        _, _, asked, group, sample = found
        calls.answered = asked
        group["answered"] += 1
        latency = (ts_ns - asked.ts_ns) / 1e6
        sample.append(latency)
        kept = asked.kept
        if kept is not None and asked.keeper is pulls:
            asked.kept = None
            ((index, row),) = kept  # (a pull's one row)
            row[_TS], row[_LATENCY], row[_CODE] = ts_ns, latency, 0
            remark = rec.remark
            row[_REMARK] = remark if remark is None else shared(remark)
            row[_CODE_NAME] = _OK_NAME
            row[_MESSAGES], row[_BYTES] = rec.messages, rec.bytes
            row[_NEXT], row[_MIN] = rec.next_begin_offset, rec.min_offset
            row[_MAX], row[_BROKER] = rec.max_offset, rec.suggested_broker_id
            if row[_LONG_POLL]:
                row[_HELD] = latency
            completed(index, row)
        offset = rec.offset if rec.max_offset is None else rec.max_offset
        if offset is None:
            return
        server = group["server"]  # (server_of the request's connection: its group's)
        max_of[(server, asked.topic, asked.queue_id)] = (offset, ts_ns)
        if asked.group is not None:  # (a pull's group gets a row)
            offset_row(server, asked.group, asked.topic, asked.queue_id)

    return on_pull, on_pulled

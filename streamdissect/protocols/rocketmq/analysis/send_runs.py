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

from typing import Any

from streamdissect.protocols.rocketmq import spec
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
    `c`, every collector fed, no row a call) as the collectors take them one at a time."""
    calls, sends, errors = c.calls, c.sends, c.errors
    open_calls = calls._pending._open  # (OpenCalls.opened and closed, inline)
    bound = calls_module.MAX_OPEN_CALLS
    of_connection, group_of = calls._of_connection, calls._group
    seen_of = c.connections._seen
    begin, completed = sends._table.begin, sends._table.completed
    asked = answered = None
    for ev in run:
        rec = ev.record
        connection, direction, ts_ns = ev.connection, ev.direction, ev.ts_ns
        seen = seen_of.get(connection)  # (ConnectionCollector.on_frame)
        if seen is None:
            seen = seen_of[connection] = {
                "requests_c2s": 0, "requests_s2c": 0, "oneway": 0, "responses": 0,
                "first_command_ns": ts_ns}  # fmt: skip
        if rec.__class__ is HotSend:  # (never oneway)
            answered = None
            # CallCollector.request
            at = (SEND_V2_CODE, connection, direction)
            found = of_connection.get(at)
            group, sample = found if found is not None else group_of(*at)
            group["calls"] += 1
            opaque = rec.opaque
            asked = Asked(ev, SEND_V2_CODE, opaque, 0, rec.topic, None, rec.queue_id)
            key = asked.key
            previous = open_calls.pop(key, None)
            open_calls[key] = (None, None, asked, group, sample)
            if len(open_calls) > bound:
                del open_calls[next(iter(open_calls))]
            if previous is not None:
                previous[3]["duplicate_ids"] += 1
            seen["requests_" + direction] += 1
            # SendCollector.on_hot_send
            wire = rec.wire
            row = _message_row(connection, server_of(connection), ts_ns, opaque, _NAME, 0,
                               _HOT_STATUS, rec.group, rec.topic, rec.queue_id, rec.msg_id,
                               rec.tags, rec.keys, False, wire, wire)  # fmt: skip
            asked.kept, asked.keeper = [(begin(row), row)], sends
            seen["last_command_ns"] = ts_ns
            continue
        asked = None
        # CallCollector._on_response
        other = _OTHER.get(direction, direction)
        found = open_calls.pop((connection, other, rec.opaque), None)
        code = rec.code
        if found is None:
            answered = None
            group_of(rec.request_code, connection, other)[0]["orphan_responses"] += 1
        else:
            answered = found[2]
            found[3]["answered"] += 1
            found[4].append((ts_ns - answered.ts_ns) / 1e6)
        seen["responses"] += 1
        seen["last_command_ns"] = ts_ns
        if code:
            calls.answered = answered
            errors.on_response(ev)
        # SendCollector.on_response (PerCall's)
        if answered is None:
            continue
        kept = answered.kept
        if kept is None or answered.keeper is not sends:
            continue
        answered.kept = None
        if code or len(kept) != 1:
            sends.answered(answered, [row for _, row in kept], ev)
        else:  # (calls.answer and SendCollector.answered for one row of a SEND_OK)
            ((index, row),) = kept
            row[_TS] = ts_ns
            row[_LATENCY] = (ts_ns - answered.ts_ns) / 1e6
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
        for index, row in kept:
            completed(index, row)
    calls.asked, calls.answered = asked, answered

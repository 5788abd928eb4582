"""Non-zero response codes per request, code and topic, with the remark the server gave
(`rocketmq_errors`): a missing topic's route, a forbidden topic, an unknown request code, a
pull past the queue's end (PULL_NOT_FOUND, PULL_OFFSET_MOVED), ..."""

from __future__ import annotations

from typing import Any

from streamdissect.protocols.rocketmq import spec


class ErrorCollector:
    def __init__(self, calls: Any) -> None:
        self._calls = calls  # (its `answered`: the request a response answers)
        self._counts: dict[tuple, dict] = {}

    def on_response(self, ev: Any) -> None:
        rec = ev.record
        if rec.code == 0:
            return
        request = self._calls.answered
        request_code = rec.request_code if request is None else request.record.code
        topic = None if request is None else request.record.topic
        key = (request_code, rec.code, topic)
        row = self._counts.get(key)
        if row is None:
            row = self._counts[key] = {
                "request_code": request_code,
                "request_name": None if request_code is None else spec.request_name(request_code),
                "code": rec.code, "code_name": rec.code_name, "topic": topic, "count": 0,
                "remark": rec.remark, "first_ts_ns": ev.ts_ns}  # fmt: skip
        row["count"] += 1

    def rows(self) -> list[dict]:
        return list(self._counts.values())

"""Every non-OK response code, by the command it answers, plus PublishError and MetadataUpdate."""

from __future__ import annotations

from collections import Counter

from streamdissect.analysis.fields import pair
from streamdissect.protocols.stream.codes import code_name

OK = 0x01


class ErrorCollector:
    def __init__(self) -> None:
        self._counts: Counter[tuple[str, int]] = Counter()
        self.events: list[dict] = []  # where each error happened

    def _add(self, ev, command: str, code: int, n: int = 1) -> None:
        self._counts[(command, code)] += n
        self.events.append(
            {"ts_ns": ev.ts_ns, "connection": ev.connection, "command": command, "code": code}
        )

    def on_response(self, ev) -> None:
        """Responses carrying a code (Credit's 0x8009 included), and MetadataUpdate."""
        rec = ev.record
        code = getattr(rec, "code", None)
        if code is None or code == OK:
            return
        self._add(ev, getattr(rec, "command", None), code)

    def on_publish_error(self, ev) -> None:
        for item in getattr(ev.record, "errors", None) or ():
            _, code = pair(item, "publishing_id", "code")
            self._add(ev, "PublishError", code)

    def rows(self) -> list[dict]:
        return [
            {"command": cmd, "code": code, "code_name": code_name(code), "count": n}
            for (cmd, code), n in sorted(self._counts.items(), key=lambda kv: (kv[0][0], kv[0][1]))
        ]

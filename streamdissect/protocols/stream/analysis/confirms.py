"""Publish-confirm ledger per (connection, publisher id).

Publish frames carry publishing ids; PublishConfirm and PublishError name them again. The lag
of an id is the time from the Publish frame carrying it to the frame naming it. Ids still
outstanding at the end are 'unconfirmed'; confirms for ids we never saw published (capture
began late) are counted as unmatched, never as negative lag. A DeclarePublisher reusing a
publisher id closes the previous ledger's outstanding ids as unconfirmed.
"""

from __future__ import annotations

import json
from array import array
from collections import Counter, deque
from dataclasses import dataclass, field
from itertools import repeat

from streamdissect.analysis.compact import CompactRows
from streamdissect.analysis.fields import pair
from streamdissect.analysis.percentiles import summarize_ms
from streamdissect.protocols.stream.codes import code_name
from streamdissect.protocols.stream.publish import id_run
from streamdissect.tables.schema import BACKLOG, PUBLISHES


@dataclass(slots=True)
class _Ledger:
    outstanding: dict[int, int] = field(default_factory=dict)  # publishing id -> publish ts
    # The common case kept as runs instead (only while `outstanding` is empty): publishing
    # ids published in ascending runs, [first, last, publish ts], confirmed from the front.
    runs: deque = field(default_factory=deque)
    in_runs: int = 0  # ids in the runs
    published: int = 0
    records: int = 0
    confirmed: int = 0
    errored: Counter = field(default_factory=Counter)
    unconfirmed: int = 0
    unmatched: int = 0
    lags_ms: array = field(default_factory=lambda: array("d"))  # 8 bytes a confirm


class ConfirmCollector:
    def __init__(self, keep_pairs: bool = True, keep_backlog: bool = True) -> None:
        self._ledgers: dict[tuple[str, int], _Ledger] = {}
        self.keep_pairs = keep_pairs
        self.keep_backlog = keep_backlog
        # PUBLISHES rows, a publishing id each: kept as columns (~65 -> ~15 MB for 285,000)
        self.pairs = CompactRows(len(PUBLISHES))
        self.backlog = CompactRows(len(BACKLOG))  # BACKLOG rows (a frame each), as columns

    def _ledger(self, connection: str, publisher_id: int) -> _Ledger:
        key = (connection, publisher_id)
        led = self._ledgers.get(key)
        if led is None:
            led = self._ledgers[key] = _Ledger()
        return led

    def _backlog_point(self, ts: int, connection: str, publisher_id: int, led: _Ledger) -> None:
        if self.keep_backlog:
            self.backlog.append((ts, connection, publisher_id,
                                 len(led.outstanding) + led.in_runs))  # fmt: skip

    @staticmethod
    def _to_dict(led: _Ledger) -> None:
        """Leave the runs for the general ledger (same ids, same order, same times)."""
        outstanding = led.outstanding
        for first, last, ts in led.runs:
            outstanding.update(zip(range(first, last + 1), repeat(ts)))
        led.runs.clear()
        led.in_runs = 0

    @staticmethod
    def _ascending(ids) -> bool:
        """Do the ids go up one by one? (A Publish's come as a range from the dissector.)"""
        run = id_run(ids)
        return run.__class__ is range and run.step == 1 and len(run) > 0

    def _publish_run(self, led: _Ledger, ids, ts: int) -> bool:
        """Publish as a run when that is exact: ascending ids after every outstanding one."""
        if led.outstanding or not self._ascending(ids):
            return False
        if led.runs and ids[0] <= led.runs[-1][1]:
            return False
        led.runs.append([ids[0], ids[-1], ts])
        led.in_runs += len(ids)
        return True

    def _confirm_run(self, led: _Ledger, ids, ts: int) -> bool:
        """Confirm from the front of the runs when the ids are exactly the next outstanding
        ones; their lags are appended as the general ledger would."""
        if not led.runs or not self._ascending(ids):
            return False
        runs = led.runs
        want, left = ids[0], len(ids)
        for first, last, _ in runs:  # check first, change nothing unless it all matches
            if first != want:
                return False
            take = min(left, last - first + 1)
            left -= take
            want = first + take
            if not left:
                break
        if left:
            return False
        left = len(ids)
        lags = led.lags_ms
        while left:
            run = runs[0]
            take = min(left, run[1] - run[0] + 1)
            lags.extend(array("d", [(ts - run[2]) / 1e6]) * take)
            run[0] += take
            left -= take
            if run[0] > run[1]:
                runs.popleft()
        led.in_runs -= len(ids)
        led.confirmed += len(ids)
        return True

    def on_declare(self, ev) -> None:
        rec = ev.record
        if getattr(rec, "response", None):
            return
        led = self._ledgers.get((ev.connection, getattr(rec, "publisher_id", None)))
        if led is not None and led.runs:
            self._to_dict(led)
        if led is not None and led.outstanding:
            self._close_outstanding(ev.connection, getattr(rec, "publisher_id", None), led)

    def on_publish(self, ev) -> None:
        rec = ev.record
        self.publish(ev.connection, ev.ts_ns, getattr(rec, "publisher_id", None),
                     getattr(rec, "publishing_ids", None) or (),
                     getattr(rec, "record_count", None))  # fmt: skip

    def publish(self, connection: str, ts: int, pid: int | None, ids,
                record_count: int | None) -> None:  # fmt: skip
        """A Publish's ids (on_publish without the record)."""
        led = self._ledger(connection, pid)
        if not (not self.keep_pairs and self._publish_run(led, ids, ts)):
            if led.runs:
                self._to_dict(led)
            outstanding = led.outstanding
            if len(ids) == 1:  # (one message a frame, as many clients send: no set needed)
                if ids[0] not in outstanding:
                    outstanding[ids[0]] = ts
            elif outstanding.keys().isdisjoint(ids) and len(set(ids)) == len(ids):
                outstanding.update(zip(ids, repeat(ts)))
            else:
                for pub_id in ids:
                    if pub_id in outstanding:  # a resend of a pending id keeps the first time
                        continue
                    outstanding[pub_id] = ts
        led.published += len(ids)
        led.records += record_count or len(ids)
        self._backlog_point(ts, connection, pid, led)

    def on_confirm(self, ev) -> None:
        rec = ev.record
        self.confirm(ev.connection, ev.ts_ns, getattr(rec, "publisher_id", None),
                     getattr(rec, "publishing_ids", None) or ())

    def confirm(self, connection: str, ts: int, pid: int | None, ids) -> None:
        """A PublishConfirm's ids (on_confirm without the record)."""
        led = self._ledger(connection, pid)
        if not self.keep_pairs:
            if not self._confirm_run(led, ids, ts):
                if led.runs:
                    self._to_dict(led)
                sent = list(map(led.outstanding.pop, ids, repeat(None)))
                if None in sent:
                    found = [s for s in sent if s is not None]
                    led.unmatched += len(sent) - len(found)
                    sent = found
                led.confirmed += len(sent)
                led.lags_ms.extend(array("d", [(ts - s) / 1e6 for s in sent]))
            self._backlog_point(ts, connection, pid, led)
            return
        rows = []
        for pub_id in ids:
            sent = led.outstanding.pop(pub_id, None)
            if sent is None:
                led.unmatched += 1
                continue
            lag = (ts - sent) / 1e6
            rows.append((connection, pid, pub_id, sent, ts, lag, "confirmed", None))
        led.confirmed += len(rows)
        led.lags_ms.extend(row[5] for row in rows)
        self.pairs.extend(rows)
        self._backlog_point(ts, connection, pid, led)

    def on_error(self, ev) -> None:
        rec = ev.record
        pid = getattr(rec, "publisher_id", None)
        led = self._ledger(ev.connection, pid)
        if led.runs:
            self._to_dict(led)
        ts = ev.ts_ns
        for item in getattr(rec, "errors", None) or ():
            pub_id, code = pair(item, "publishing_id", "code")
            led.errored[code] += 1
            sent = led.outstanding.pop(pub_id, None)
            if self.keep_pairs:
                lag = None if sent is None else (ts - sent) / 1e6
                self.pairs.append((ev.connection, pid, pub_id, sent, ts, lag, "errored", code))
        self._backlog_point(ev.ts_ns, ev.connection, pid, led)

    def _close_outstanding(self, connection: str, pid: int, led: _Ledger) -> None:
        if led.runs:
            self._to_dict(led)
        led.unconfirmed += len(led.outstanding)
        if self.keep_pairs:
            for pub_id, sent in led.outstanding.items():
                self.pairs.append((connection, pid, pub_id, sent, None, None, "unconfirmed", None))
        led.outstanding.clear()

    def finish(self) -> None:
        for (connection, pid), led in self._ledgers.items():
            self._close_outstanding(connection, pid, led)

    def summary(self) -> list[dict]:
        rows = []
        for (connection, pid), led in self._ledgers.items():
            row = {
                "connection": connection,
                "publisher_id": pid,
                "published": led.published,
                "records_published": led.records,
                "confirmed": led.confirmed,
                "errored": sum(led.errored.values()),
                "unconfirmed": led.unconfirmed + len(led.outstanding) + led.in_runs,
                "unmatched_confirms": led.unmatched,
                "errors_by_code": json.dumps(
                    {code_name(c): n for c, n in sorted(led.errored.items())}
                ),
            }
            stats = summarize_ms(led.lags_ms)
            del stats["min_ms"]
            row.update(stats)
            rows.append(row)
        return rows

"""Publish-confirm ledger per (connection, publisher id).

Publish frames carry publishing ids; PublishConfirm and PublishError name them again. The lag
of an id is the time from the Publish frame carrying it to the frame naming it. Ids still
outstanding at the end are 'unconfirmed'; confirms for ids we never saw published (capture
began late) are counted as unmatched, never as negative lag. A DeclarePublisher reusing a
publisher id closes the previous ledger's outstanding ids as unconfirmed.

A frame cut by the capture (snap length) counts what its header says: a Publish its message
count (its ids are not followed), a PublishConfirm its id count (its whole ids pair). Once a
ledger has a cut frame (`cut_frames`, a column), a confirmed id not seen published is
counted confirmed (its Publish was cut), not unmatched, its lag unknown; unconfirmed is then
published less confirmed and errored, from the counts; the ledger's figures are lower
bounds.

Hot frames as columns (`on_hot`): a ledger's Publish and PublishConfirm frames of a run are
applied at once when they are the usual case (ids published in ascending order, confirmed
from the front); any other ledger's go through publish() and confirm(), one by one, in order.
"""

from __future__ import annotations

import json
from array import array
from collections import Counter, deque
from itertools import repeat
from typing import Any

import numpy as np

from streamdissect.analysis.compact import CompactRows
from streamdissect.analysis.fields import cut_count, pair
from streamdissect.analysis.percentiles import ExactSample, summarize_sample
from streamdissect.protocols.stream.analysis import hot_input
from streamdissect.protocols.stream.codes import code_name
from streamdissect.protocols.stream.hot import CONFIRM_KEY, PUBLISH_KEY, HotFrames
from streamdissect.protocols.stream.publish import id_run
from streamdissect.protocols.stream.tables import BACKLOG, PUBLISHES
from streamdissect.slotted import Unequal


def cut_publish_counts(record: Any) -> tuple[int, int]:
    """A Publish the capture cut: (its messages, as its header counts them; its records at
    least, as its cut says: a sub-batch's from its entry header, one a message past it)."""
    ids = getattr(record, "publishing_ids", None) or ()
    messages = max(cut_count(record, "messages"), len(ids))
    return messages, max(cut_count(record, "messages", "records"), messages)


class _Ledger(Unequal):
    """A publisher's publishes waiting for their confirms."""

    __slots__ = field_names = ("outstanding", "runs", "in_runs", "published", "records",
                               "confirmed", "errored", "unconfirmed", "unmatched",
                               "cut_frames", "unpaired", "lags_ms")  # fmt: skip
    outstanding: dict[int, int]  # publishing id -> publish ts
    # The common case kept as runs instead (only while `outstanding` is empty): publishing
    # ids published in ascending runs, [first, last, publish ts], confirmed from the front.
    runs: deque
    in_runs: int  # ids in the runs
    published: int
    records: int
    confirmed: int
    errored: Counter
    unconfirmed: int
    unmatched: int
    cut_frames: int  # Publish/PublishConfirm frames cut by the capture
    unpaired: int  # ids confirmed that could not be paired with their Publish (cut)
    # exact percentiles in memory a distinct lag (not a confirm)
    lags_ms: ExactSample

    def __init__(self, outstanding: dict[int, int] | None = None, runs: deque | None = None,
                 in_runs: int = 0, published: int = 0, records: int = 0, confirmed: int = 0,
                 errored: Counter | None = None, unconfirmed: int = 0, unmatched: int = 0,
                 cut_frames: int = 0, unpaired: int = 0,
                 lags_ms: ExactSample | None = None) -> None:  # fmt: skip
        self.outstanding = {} if outstanding is None else outstanding
        self.runs = deque() if runs is None else runs
        self.in_runs = in_runs
        self.published = published
        self.records = records
        self.confirmed = confirmed
        self.errored = Counter() if errored is None else errored
        self.unconfirmed = unconfirmed
        self.unmatched = unmatched
        self.cut_frames = cut_frames
        self.unpaired = unpaired
        self.lags_ms = ExactSample() if lags_ms is None else lags_ms


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
        ids = getattr(rec, "publishing_ids", None) or ()
        pid = getattr(rec, "publisher_id", None)
        if getattr(rec, "truncated", False):
            # Counted as its header says, its ids not followed: most of its confirms' ids
            # are cut too, and ids kept for confirms that never name them would grow the
            # ledger with the capture.
            led = self._ledger(ev.connection, pid)
            led.cut_frames += 1
            messages, records = cut_publish_counts(rec)
            led.published += messages
            led.records += records
            self._backlog_point(ev.ts_ns, ev.connection, pid, led)
            return
        self.publish(ev.connection, ev.ts_ns, pid, ids, getattr(rec, "record_count", None))

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
        ids = getattr(rec, "publishing_ids", None) or ()
        if getattr(rec, "truncated", False):  # the ids past the cut: confirmed, unpaired
            led = self._ledger(ev.connection, getattr(rec, "publisher_id", None))
            led.cut_frames += 1
            led.unpaired += max(cut_count(rec, "publishing_ids") - len(ids), 0)
        self.confirm(ev.connection, ev.ts_ns, getattr(rec, "publisher_id", None), ids)

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
                    self._not_found(led, len(sent) - len(found))
                    sent = found
                led.confirmed += len(sent)
                led.lags_ms.extend(array("d", [(ts - s) / 1e6 for s in sent]))
            self._backlog_point(ts, connection, pid, led)
            return
        rows = []
        for pub_id in ids:
            sent = led.outstanding.pop(pub_id, None)
            if sent is None:
                self._not_found(led, 1)
                continue
            lag = (ts - sent) / 1e6
            rows.append((connection, pid, pub_id, sent, ts, lag, "confirmed", None))
        led.confirmed += len(rows)
        led.lags_ms.extend(row[5] for row in rows)
        self.pairs.extend(rows)
        self._backlog_point(ts, connection, pid, led)

    def on_hot(self, run: HotFrames) -> None:
        """The Publish and PublishConfirm frames of hot frames as columns, per ledger."""
        if hot_input.is_short(run):
            for i, key, ts, connection, _, _, pid, records in hot_input.frames_of(
                    run, (PUBLISH_KEY, CONFIRM_KEY), ("publisher_id", "record_count")):  # fmt: skip
                if key == PUBLISH_KEY:
                    self.publish(connection, ts, pid, run.ids(i), records)
                else:
                    self.confirm(connection, ts, pid, run.ids(i))
            return
        rows = np.flatnonzero((run.key == PUBLISH_KEY) | (run.key == CONFIRM_KEY))
        if not len(rows):
            return
        # Backlog points and pairs rows of every ledger, put in frame order at the end.
        backlog, pairs = self.backlog, self.pairs
        points: list = []
        pair_parts: list = []
        if self.keep_backlog:
            self.backlog = []
        pid = run.fields["publisher_id"][0][rows]
        group = run.connection[rows] * 256 + pid
        for g in hot_input.groups(group, first_seen=True):
            mine = rows[group == g]
            connection = run.connections[g // 256]
            after = self._ledger_at_once(run, mine, connection, g % 256, pair_parts)
            if after is None:
                after = self._ledger_one_by_one(run, mine, connection, g % 256, pair_parts)
            points.append((mine, connection, g % 256, after))
        self.backlog, self.pairs = backlog, pairs
        if self.keep_backlog:
            _backlog_in_order(backlog, run, points)
        if pair_parts:
            _pairs_in_order(pairs, pair_parts)

    def _ledger_one_by_one(self, run: HotFrames, rows: np.ndarray, connection: str, pid: int,
                           pair_parts: list) -> list:  # fmt: skip
        """The ledger's frames through publish() and confirm(), in order; the backlog after
        each."""
        records = run.fields["record_count"][0]
        after = []
        made, at = [], []  # pairs rows, and the frame each came with
        if self.keep_pairs:
            self.pairs = made
        for i in rows.tolist():
            ids = run.ids(i)
            before = len(made)
            if run.key[i] == PUBLISH_KEY:
                self.publish(connection, int(run.ts_ns[i]), pid, ids, int(records[i]))
            else:
                self.confirm(connection, int(run.ts_ns[i]), pid, ids)
            at += [i] * (len(made) - before)
            if self.keep_backlog:
                after.append(self.backlog.pop()[3])
        if made:
            pair_parts.append((np.asarray(at, dtype=np.int64),
                               [list(column) for column in zip(*made)]))  # fmt: skip
        return after

    def _ledger_at_once(self, run: HotFrames, rows: np.ndarray, connection: str, pid: int,
                        pair_parts: list) -> np.ndarray | None:  # fmt: skip
        """One ledger's frames of the run over columns, when that is exact: the ids of every
        frame one by one upwards and above every earlier one (those outstanding included),
        the confirms naming exactly the oldest outstanding ids, each after its Publish.
        Returns the number outstanding after each frame (None: not exact, nothing changed)."""
        led = self._ledger(connection, pid)
        frame_of, where = run.id_positions(rows)
        ids = run.id_values[where]
        if len(ids) and ids.max() > hot_input.U63:
            return None
        ids = ids.astype(np.int64)
        is_publish = run.key[rows] == PUBLISH_KEY
        publish_of = is_publish[frame_of]
        published, confirmed = ids[publish_of], ids[~publish_of]
        pub_frame, conf_frame = frame_of[publish_of], frame_of[~publish_of]
        if np.any((frame_of[1:] == frame_of[:-1]) & (np.diff(ids) != 1)):  # (within a frame)
            return None
        if len(published) > 1 and np.any(np.diff(published) <= 0):
            return None
        # the outstanding queue: its ids and publish times, then this run's published ids
        old_ids, old_ts = _outstanding(led)
        if old_ids is None:
            return None
        if len(old_ids) and len(published) and published[0] <= old_ids[-1]:
            return None
        n_confirmed = len(confirmed)
        if n_confirmed > len(old_ids) + len(published):
            return None
        take_new = max(0, n_confirmed - len(old_ids))
        take_old = n_confirmed - take_new
        if not np.array_equal(np.concatenate((old_ids[:take_old], published[:take_new])),
                              confirmed):  # fmt: skip
            return None
        if take_new and np.any(pub_frame[:take_new] >= conf_frame[take_old:]):
            return None  # (a confirm before the Publish of its id)
        # Exact: apply.
        ts = run.ts_ns[rows]
        confirm_ts = ts[conf_frame]
        sent = np.concatenate((old_ts[:take_old], ts[pub_frame[:take_new]]))
        lags = (confirm_ts - sent) / 1e6
        led.lags_ms.extend(array("d", lags.tobytes()))
        led.confirmed += n_confirmed
        led.published += len(published)
        counts = np.maximum(run.id_counts[rows], 0)
        record_count = run.fields["record_count"][0][rows]
        led.records += int(np.where(record_count > 0, record_count, counts)[is_publish].sum())
        if self.keep_pairs and n_confirmed:
            n = n_confirmed
            pair_parts.append((rows[conf_frame], [
                [connection] * n, np.full(n, pid), confirmed, sent, confirm_ts, lags,
                ["confirmed"] * n, [None] * n]))  # fmt: skip
        left_ids = np.concatenate((old_ids[take_old:], published[take_new:]))
        left_ts = np.concatenate((old_ts[take_old:], ts[pub_frame[take_new:]]))
        _keep_outstanding(led, left_ids, left_ts, as_runs=not self.keep_pairs)
        return len(old_ids) + np.cumsum(np.where(is_publish, counts, -counts))

    @staticmethod
    def _not_found(led: _Ledger, n: int) -> None:
        """Confirmed ids never seen published: before the capture (unmatched), or in a
        Publish the capture cut (confirmed, unpaired)."""
        if led.cut_frames:
            led.unpaired += n
        else:
            led.unmatched += n

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
            errored = sum(led.errored.values())
            confirmed = led.confirmed + led.unpaired
            unconfirmed = led.unconfirmed + len(led.outstanding) + led.in_runs
            if led.cut_frames:  # (ids of cut frames cannot be followed: from the counts)
                unconfirmed = max(led.published - confirmed - errored, 0)
            row = {
                "connection": connection,
                "publisher_id": pid,
                "published": led.published,
                "records_published": led.records,
                "confirmed": confirmed,
                "errored": errored,
                "unconfirmed": unconfirmed,
                "unmatched_confirms": led.unmatched,
                "cut_frames": led.cut_frames,
                "errors_by_code": json.dumps(
                    {code_name(c): n for c, n in sorted(led.errored.items())}
                ),
            }
            stats = summarize_sample(led.lags_ms)
            del stats["min_ms"]
            row.update(stats)
            rows.append(row)
        return rows


def _outstanding(led: _Ledger) -> tuple:
    """The ledger's outstanding ids and their publish times, oldest first: from its runs, or
    from its dict when the ids there go up in the order they were published; (None, None)
    for any other dict."""
    if led.runs:
        ids = np.concatenate([np.arange(first, last + 1, dtype=np.int64)
                              for first, last, _ in led.runs])  # fmt: skip
        ts = np.concatenate([np.full(last - first + 1, t, dtype=np.int64)
                             for first, last, t in led.runs])  # fmt: skip
        return ids, ts
    if not led.outstanding:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    ids = np.fromiter(led.outstanding.keys(), dtype=np.uint64, count=len(led.outstanding))
    if ids.max() > hot_input.U63:
        return None, None
    ids = ids.astype(np.int64)
    if len(ids) > 1 and np.any(np.diff(ids) <= 0):
        return None, None
    return ids, np.fromiter(led.outstanding.values(), dtype=np.int64, count=len(ids))


def _keep_outstanding(led: _Ledger, ids: np.ndarray, ts: np.ndarray, as_runs: bool) -> None:
    """The ids left outstanding, as the ledger keeps them: ascending runs (report mode) or
    its dict of id -> publish time (when pairs are kept, it never makes runs)."""
    led.runs.clear()
    led.outstanding.clear()
    led.in_runs = 0
    if not len(ids):
        return
    if not as_runs:
        led.outstanding.update(zip(ids.tolist(), ts.tolist()))
        return
    breaks = np.flatnonzero((np.diff(ids) != 1) | (np.diff(ts) != 0)) + 1
    starts = np.r_[0, breaks]
    stops = np.r_[breaks, len(ids)] - 1
    led.runs.extend([first, last, t] for first, last, t in zip(
        ids[starts].tolist(), ids[stops].tolist(), ts[starts].tolist()))  # fmt: skip
    led.in_runs = len(ids)


def _pairs_in_order(pairs: Any, parts: list) -> None:
    """The ledgers' pairs rows of a run (part: the frame of each row, its columns) in frame
    order, onto the collector's pairs."""
    if len(parts) == 1:  # (one publisher confirmed in the run: in order already)
        columns = parts[0][1]
        pairs.extend_columns([(c, None) for c in columns], len(parts[0][0]))
        return
    at = np.concatenate([frames for frames, _ in parts])
    order = np.argsort(at, kind="stable")
    columns = []
    for i in range(len(parts[0][1])):
        pieces = [columns_[i] for _, columns_ in parts]
        if all(isinstance(p, np.ndarray) for p in pieces):
            columns.append((np.concatenate(pieces)[order], None))
        else:
            every = [v for p in pieces for v in (p.tolist() if isinstance(p, np.ndarray) else p)]
            columns.append(([every[k] for k in order.tolist()], None))
    pairs.extend_columns(columns, len(at))


def _backlog_in_order(backlog: Any, run: HotFrames, points: list) -> None:
    """The ledgers' backlog points of a run (after each of their frames) in frame order."""
    rows = np.concatenate([mine for mine, _, _, _ in points])
    order = np.argsort(rows, kind="stable")
    names = [name for mine, name, _, _ in points for _ in range(len(mine))]
    pids = np.concatenate([np.full(len(mine), pid) for mine, _, pid, _ in points])
    counts = np.concatenate([np.asarray(after, dtype=np.int64) for _, _, _, after in points])
    backlog.extend_columns([(run.ts_ns[rows][order], None),
                            ([names[k] for k in order.tolist()], None), (pids[order], None),
                            (counts[order], None)], len(rows))  # fmt: skip

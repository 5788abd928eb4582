"""The collectors fed a HotFrames at a time (the bulk engine's columns mode): what the
per-frame calls of run._lean_handlers do for each hot frame, done over columns.

Per connection and direction, per second, per publisher and per subscription, the frames of
a run are grouped with numpy and applied at once; the confirm ledger takes the usual case
(ids published in ascending order, confirmed from the front) over columns and hands any
other ledger's frames to ConfirmCollector one by one, in order. tests/test_analysis_runs.py
holds every table equal to the per-frame path.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Any

import numpy as np

from streamdissect.protocols.stream.analysis.columns import _apply_run
from streamdissect.protocols.stream.analysis.consumption import NS_PER_S
from streamdissect.protocols.stream.hot import (
    CONFIRM_KEY,
    CREDIT_KEY,
    DELIVER_KEY,
    DIRECTIONS,
    HEARTBEAT_KEY,
    PUBLISH_KEY,
)

if TYPE_CHECKING:
    from streamdissect.analysis.driver import Collectors
    from streamdissect.protocols.stream.hot import HotFrames

U63 = (1 << 63) - 1
SHORT_RUN = 64  # a run shorter than this goes frame by frame (_one_by_one)


class RunAnalysis:
    """`analysis(run)`: one HotFrames into the collectors."""

    def __init__(self, collectors: Collectors) -> None:
        self.c = collectors

    def __call__(self, run: HotFrames) -> None:
        if len(run) < SHORT_RUN:
            self._one_by_one(run)
            return
        key = run.key
        self._lifecycle(run, key)
        self._throughput(run, key)
        self._confirms(run, key)
        self._credit(run, key)
        self._deliveries(run, key)

    def _one_by_one(self, run: HotFrames) -> None:
        """A short run frame by frame, as run._lean_handlers and the record path call the
        collectors (numpy's fixed cost a call is more than a few frames' Python)."""
        c = self.c
        seen = c.lifecycle.seen
        f = {name: values.tolist() for name, (values, _) in run.fields.items()}
        has_committed = run.fields["committed_chunk_id"][1].tolist()
        rows = zip(run.key.tolist(), run.ts_ns.tolist(), run.connection.tolist(),
                   run.direction.tolist(), run.size.tolist(), run.crc.tolist())  # fmt: skip
        for i, (key, ts, number, side, size, crc) in enumerate(rows):
            connection, direction = run.connections[number], DIRECTIONS[side]
            seen(connection, direction, ts)
            if key == HEARTBEAT_KEY:
                c.lifecycle.heartbeat(connection, direction)
            elif key == CREDIT_KEY:
                c.credit.credit(connection, ts, f["subscription_id"][i], f["credit"][i])
            elif key == PUBLISH_KEY:
                records = f["record_count"][i]
                c.confirms.publish(connection, ts, f["publisher_id"][i], run.ids(i), records)
                c.throughput.published(ts, records, size)
            elif key == CONFIRM_KEY:
                ids = run.ids(i)
                c.confirms.confirm(connection, ts, f["publisher_id"][i], ids)
                c.throughput.confirmed(ts, len(ids))
            else:  # Deliver
                sid, records, first = f["subscription_id"][i], f["record_count"][i], f["chunk_id"][i]
                committed = f["committed_chunk_id"][i] if has_committed[i] else None
                c.credit.deliver(connection, ts, sid, records, committed, first)
                crc_ok = None if crc < 0 or not c.deliveries.crc else crc == 1
                c.deliveries.deliver(connection, ts, sid, committed, first,
                                     f["chunk_timestamp_ms"][i], records, f["num_entries"][i],
                                     f["chunk_type"][i], size, crc_ok)  # fmt: skip
                c.throughput.delivered(ts, records, size)

    # --- per connection and direction -------------------------------------------------

    def _lifecycle(self, run: HotFrames, key: np.ndarray) -> None:
        lifecycle = self.c.lifecycle
        # first_ns and last_ns: the connection's first and last frames in the run's order
        for number, name in enumerate(run.connections):
            rows = np.flatnonzero(run.connection == number)
            if len(rows):
                c = lifecycle._conn(name)
                if c.first_ns is None:
                    c.first_ns = int(run.ts_ns[rows[0]])
                c.last_ns = int(run.ts_ns[rows[-1]])
        group = run.connection * 2 + run.direction
        for g in _groups(group):
            rows = np.flatnonzero(group == g)
            connection, direction = run.connections[g // 2], ("c2s", "s2c")[g % 2]
            ts = run.ts_ns[rows]
            c = lifecycle._conn(connection)
            previous = c.last_seen.get(direction)
            if c.heartbeat:
                gaps = np.diff(ts) if previous is None else np.diff(ts, prepend=previous)
                c.missed_gaps += int(np.count_nonzero(gaps > 2 * c.heartbeat * NS_PER_S))
            c.last_seen[direction] = int(ts[-1])
            c.heartbeats[direction] += int(np.count_nonzero(key[rows] == HEARTBEAT_KEY))

    # --- per second ----------------------------------------------------------------

    def _throughput(self, run: HotFrames, key: np.ndarray) -> None:
        buckets = self.c.throughput._buckets
        records = np.where(run.fields["record_count"][1], run.fields["record_count"][0], 0)
        size = run.size.astype(np.int64) + 4
        publish, deliver = key == PUBLISH_KEY, key == DELIVER_KEY
        confirmed = np.where(key == CONFIRM_KEY, np.maximum(run.id_counts, 0), 0)
        wanted = publish | deliver | (key == CONFIRM_KEY)
        if not wanted.any():
            return
        seconds = run.ts_ns[wanted] // NS_PER_S
        low = int(seconds.min())
        if int(seconds.max()) - low < 1 << 16:  # (a run spans a few seconds: no sort)
            where = seconds - low
            present = np.bincount(where)
            found = np.flatnonzero(present) + low
            where = (np.cumsum(present > 0) - 1)[where]
        else:
            found, where = np.unique(seconds, return_inverse=True)
        sums = []
        for values in (np.where(publish, records, 0), np.where(publish, size, 0), confirmed,
                       np.where(deliver, records, 0), np.where(deliver, size, 0)):
            sums.append(np.bincount(where, weights=values[wanted].astype(np.float64),
                                    minlength=len(found)).astype(np.int64).tolist())
        for k, second in enumerate(found.tolist()):
            bucket = buckets[second]
            for i in range(5):
                bucket[i] += sums[i][k]

    # --- per publisher --------------------------------------------------------------

    def _confirms(self, run: HotFrames, key: np.ndarray) -> None:
        rows = np.flatnonzero((key == PUBLISH_KEY) | (key == CONFIRM_KEY))
        if not len(rows):
            return
        confirms = self.c.confirms
        # Backlog points and pairs rows of every ledger, put in frame order at the end.
        backlog, pairs = confirms.backlog, confirms.pairs
        points: list = []
        self.pair_parts: list = []
        if confirms.keep_backlog:
            confirms.backlog = []
        pid = run.fields["publisher_id"][0][rows]
        group = run.connection[rows] * 256 + pid
        for g in _groups(group, first_seen=True):
            mine = rows[group == g]
            connection = run.connections[g // 256]
            after = self._ledger_at_once(run, mine, connection, g % 256)
            if after is None:
                after = self._ledger_one_by_one(run, mine, connection, g % 256)
            points.append((mine, connection, g % 256, after))
        confirms.backlog, confirms.pairs = backlog, pairs
        if confirms.keep_backlog:
            _backlog_in_order(backlog, run, points)
        if self.pair_parts:
            _pairs_in_order(pairs, self.pair_parts)

    def _ledger_one_by_one(self, run: HotFrames, rows: np.ndarray, connection: str,
                           pid: int) -> list:  # fmt: skip
        """The ledger's frames through ConfirmCollector, in order; the backlog after each."""
        confirms = self.c.confirms
        records = run.fields["record_count"][0]
        after = []
        made, at = [], []  # pairs rows, and the frame each came with
        if confirms.keep_pairs:
            confirms.pairs = made
        for i in rows.tolist():
            ids = run.ids(i)
            before = len(made)
            if run.key[i] == PUBLISH_KEY:
                confirms.publish(connection, int(run.ts_ns[i]), pid, ids, int(records[i]))
            else:
                confirms.confirm(connection, int(run.ts_ns[i]), pid, ids)
            at += [i] * (len(made) - before)
            if confirms.keep_backlog:
                after.append(confirms.backlog.pop()[3])
        if made:
            self.pair_parts.append((np.asarray(at, dtype=np.int64),
                                    [list(column) for column in zip(*made)]))  # fmt: skip
        return after

    def _ledger_at_once(self, run: HotFrames, rows: np.ndarray, connection: str,
                        pid: int) -> np.ndarray | None:  # fmt: skip
        """One ledger's frames of the run over columns, when that is exact: the ids of every
        frame one by one upwards and above every earlier one (those outstanding included),
        the confirms naming exactly the oldest outstanding ids, each after its Publish.
        Returns the number outstanding after each frame (None: not exact, nothing changed)."""
        confirms = self.c.confirms
        led = confirms._ledger(connection, pid)
        frame_of, ids = _ids_of(run, rows)
        if len(ids) and ids.max() > U63:
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
        if confirms.keep_pairs and n_confirmed:
            n = n_confirmed
            self.pair_parts.append((rows[conf_frame], [
                [connection] * n, np.full(n, pid), confirmed, sent, confirm_ts, lags,
                ["confirmed"] * n, [None] * n]))  # fmt: skip
        left_ids = np.concatenate((old_ids[take_old:], published[take_new:]))
        left_ts = np.concatenate((old_ts[take_old:], ts[pub_frame[take_new:]]))
        _keep_outstanding(led, left_ids, left_ts, as_runs=not confirms.keep_pairs)
        return len(old_ids) + np.cumsum(np.where(is_publish, counts, -counts))

    # --- per subscription -----------------------------------------------------------

    def _credit(self, run: HotFrames, key: np.ndarray) -> None:
        credit = self.c.credit
        rows = np.flatnonzero((key == CREDIT_KEY) | (key == DELIVER_KEY))
        if not len(rows):
            return
        sid = run.fields["subscription_id"][0][rows]
        group = run.connection[rows] * 256 + sid
        committed, ok_committed = run.fields["committed_chunk_id"]
        chunk_id, ok_chunk = run.fields["chunk_id"]
        ahead = ok_committed & ok_chunk & (committed > chunk_id)
        records = run.fields["record_count"][0]
        amount = run.fields["credit"][0]
        for g in _groups(group, first_seen=True):
            mine = rows[group == g]
            sub = credit.subscription(run.connections[g // 256], g % 256)
            _apply_run(sub, credit.at_once_ns, {
                "ts": run.ts_ns[mine], "amount": amount[mine], "records": records[mine],
                "ahead": ahead[mine], "credit": key[mine] == CREDIT_KEY})  # fmt: skip

    # --- per Deliver ------------------------------------------------------------------

    def _deliveries(self, run: HotFrames, key: np.ndarray) -> None:
        deliveries = self.c.deliveries
        if not deliveries.keep_rows:
            return
        rows = np.flatnonzero(key == DELIVER_KEY)
        if not len(rows):
            return
        f = run.fields
        ts = run.ts_ns[rows]
        first, committed = f["chunk_id"][0][rows], f["committed_chunk_id"][0][rows]
        has_committed = f["committed_chunk_id"][1][rows]
        chunk_ts = f["chunk_timestamp_ms"][0][rows]
        if max(int(committed.max()), int(first.max())) > U63:  # (u64 ids: Python's ints)
            lag = [c - f for c, f in zip(committed.tolist(), first.tolist())]
        else:
            lag = np.where(has_committed, committed.astype(np.int64) - first.astype(np.int64), 0)
        columns = [
            (ts, None), ([run.connections[n] for n in run.connection[rows].tolist()], None),
            (f["subscription_id"][0][rows], None), (first, None),
            (f["record_count"][0][rows], None), (f["num_entries"][0][rows], None),
            (f["chunk_type"][0][rows], None), (chunk_ts, None),
            (committed, ~has_committed), (lag, ~has_committed),
            (ts / 1e6 - chunk_ts, None), (run.size[rows], None),
            (run.crc[rows] == 1, (run.crc[rows] < 0) | (not deliveries.crc)),
        ]  # fmt: skip
        if isinstance(deliveries.rows, list):  # (not compact: the tuples themselves)
            cells = [_cells(values, none) for values, none in columns]
            deliveries.rows.extend(zip(*cells))
        else:
            deliveries.rows.extend_columns(columns, len(rows))


def _groups(group: np.ndarray, first_seen: bool = False) -> list[int]:
    """The distinct values of a small non-negative key (connection and id numbers), in
    order, or in the order they first appear; counted, not sorted."""
    found = np.flatnonzero(np.bincount(group))
    if first_seen and len(found) > 1:
        first = [int(np.argmax(group == g)) for g in found.tolist()]
        found = found[np.argsort(first)]
    return found.tolist()


def _ids_of(run: HotFrames, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the frame number within `rows` of each id, the ids) of the frames `rows`, in order."""
    frame_of, where = run.id_positions(rows)
    return frame_of, run.id_values[where]


def _outstanding(led: Any) -> tuple:
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
    if ids.max() > U63:
        return None, None
    ids = ids.astype(np.int64)
    if len(ids) > 1 and np.any(np.diff(ids) <= 0):
        return None, None
    return ids, np.fromiter(led.outstanding.values(), dtype=np.int64, count=len(ids))


def _keep_outstanding(led: Any, ids: np.ndarray, ts: np.ndarray, as_runs: bool) -> None:
    """The ids left outstanding, as ConfirmCollector keeps them: ascending runs (its report
    mode) or its dict of id -> publish time (when it keeps pairs, it never makes runs)."""
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



def _cells(values: Any, none: Any) -> list:
    """A column's values as Python objects, None where `none` says."""
    items = values.tolist() if isinstance(values, np.ndarray) else list(values)
    if none is None or not np.any(none):
        return items
    return [None if n else v for v, n in zip(items, np.asarray(none).tolist())]

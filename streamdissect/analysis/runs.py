"""The collectors fed a FrameRun at a time (the bulk engine's columns mode): what the
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

from ..engine.hot import CONFIRM_KEY, CREDIT_KEY, DELIVER_KEY, HEARTBEAT_KEY, PUBLISH_KEY
from .columns import _apply_run
from .consumption import NS_PER_S

if TYPE_CHECKING:
    from ..engine.hot import FrameRun
    from .run import Collectors

U63 = (1 << 63) - 1


class RunAnalysis:
    """`analysis(run)`: one FrameRun into the collectors."""

    def __init__(self, collectors: Collectors) -> None:
        self.c = collectors

    def __call__(self, run: FrameRun) -> None:
        key = run.key
        self._lifecycle(run, key)
        self._throughput(run, key)
        self._confirms(run, key)
        self._credit(run, key)
        self._deliveries(run, key)

    # --- per connection and direction -------------------------------------------------

    def _lifecycle(self, run: FrameRun, key: np.ndarray) -> None:
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
        for g in np.unique(group).tolist():
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

    def _throughput(self, run: FrameRun, key: np.ndarray) -> None:
        buckets = self.c.throughput._buckets
        records = np.where(run.fields["record_count"][1], run.fields["record_count"][0], 0)
        size = run.size.astype(np.int64) + 4
        publish, deliver = key == PUBLISH_KEY, key == DELIVER_KEY
        confirmed = np.where(key == CONFIRM_KEY, np.maximum(run.id_counts, 0), 0)
        wanted = publish | deliver | (key == CONFIRM_KEY)
        if not wanted.any():
            return
        seconds = run.ts_ns[wanted] // NS_PER_S
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

    def _confirms(self, run: FrameRun, key: np.ndarray) -> None:
        rows = np.flatnonzero((key == PUBLISH_KEY) | (key == CONFIRM_KEY))
        if not len(rows):
            return
        pid = run.fields["publisher_id"][0][rows]
        group = run.connection[rows] * 256 + pid
        found, first_at = np.unique(group, return_index=True)
        for g in found[np.argsort(first_at)].tolist():
            mine = rows[group == g]
            connection = run.connections[g // 256]
            if not self._ledger_at_once(run, mine, connection, g % 256):
                self._ledger_one_by_one(run, mine, connection, g % 256)

    def _ledger_one_by_one(self, run: FrameRun, rows: np.ndarray, connection: str,
                           pid: int) -> None:  # fmt: skip
        confirms = self.c.confirms
        records = run.fields["record_count"][0]
        for i in rows.tolist():
            ids = run.ids(i)
            if run.key[i] == PUBLISH_KEY:
                confirms.publish(connection, int(run.ts_ns[i]), pid, ids, int(records[i]))
            else:
                confirms.confirm(connection, int(run.ts_ns[i]), pid, ids)

    def _ledger_at_once(self, run: FrameRun, rows: np.ndarray, connection: str,
                        pid: int) -> bool:  # fmt: skip
        """One ledger's frames of the run over columns, when that is exact: no pairs or
        backlog kept, no id outstanding outside the ascending runs, the ids of every frame
        one by one upwards and above every earlier one, the confirms naming exactly the
        oldest outstanding ids, each after its Publish. False: nothing changed."""
        confirms = self.c.confirms
        if confirms.keep_pairs or confirms.keep_backlog:
            return False
        led = confirms._ledger(connection, pid)
        if led.outstanding:
            return False
        is_publish = run.key[rows] == PUBLISH_KEY
        counts = run.id_counts[rows]
        frame_of, ids = _ids_of(run, rows)
        if len(ids) and ids.max() > U63:
            return False
        steps = np.diff(ids.astype(np.int64)) if len(ids) > 1 else np.zeros(0, dtype=np.int64)
        publish_of = is_publish[frame_of]
        published, confirmed = ids[publish_of].astype(np.int64), ids[~publish_of].astype(np.int64)
        pub_frame, conf_frame = frame_of[publish_of], frame_of[~publish_of]
        # ids of each frame one by one upwards
        same = frame_of[1:] == frame_of[:-1]
        if len(steps) and np.any(same & (steps != 1)):
            return False
        if len(published) > 1 and np.any(np.diff(published) <= 0):
            return False
        old = [(first, last, ts) for first, last, ts in led.runs]
        if old and len(published) and published[0] <= old[-1][1]:
            return False
        # the outstanding queue: the runs' ids, then this run's published ids
        n_confirmed = len(confirmed)
        if n_confirmed > led.in_runs + len(published):
            return False
        take_new = max(0, n_confirmed - led.in_runs)
        take_old = n_confirmed - take_new
        front = np.concatenate((_run_ids(old, take_old), published[:take_new]))
        if not np.array_equal(front, confirmed):
            return False
        ts = run.ts_ns[rows]
        if take_new:  # each of this run's ids confirmed after the Publish that carried it
            if np.any(pub_frame[:take_new] >= conf_frame[n_confirmed - take_new :]):
                return False
        # Exact: apply.
        confirm_ts = ts[conf_frame]
        sent = np.concatenate((_run_times(old, take_old), ts[pub_frame[:take_new]]))
        led.lags_ms.extend(array("d", ((confirm_ts - sent) / 1e6).tolist()))
        led.confirmed += n_confirmed
        led.published += len(published)
        record_count = run.fields["record_count"][0][rows][is_publish]
        led.records += int(np.where(record_count > 0, record_count, counts[is_publish]).sum())
        _drop_front(led.runs, take_old)
        left = published[take_new:]
        if len(left):
            left_ts = ts[pub_frame[take_new:]]
            # runs of ids that go up one by one at one time (a frame's)
            breaks = np.flatnonzero((np.diff(left) != 1) | (np.diff(left_ts) != 0)) + 1
            starts = np.r_[0, breaks]
            stops = np.r_[breaks, len(left)] - 1
            led.runs.extend([first, last, t] for first, last, t in zip(
                left[starts].tolist(), left[stops].tolist(), left_ts[starts].tolist()))
        led.in_runs = sum(last - first + 1 for first, last, _ in led.runs)
        return True

    # --- per subscription -----------------------------------------------------------

    def _credit(self, run: FrameRun, key: np.ndarray) -> None:
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
        found, first_at = np.unique(group, return_index=True)
        for g in found[np.argsort(first_at)].tolist():
            mine = rows[group == g]
            sub = credit.subscription(run.connections[g // 256], g % 256)
            _apply_run(sub, credit.at_once_ns, {
                "ts": run.ts_ns[mine], "amount": amount[mine], "records": records[mine],
                "ahead": ahead[mine], "credit": key[mine] == CREDIT_KEY})  # fmt: skip

    # --- per Deliver ------------------------------------------------------------------

    def _deliveries(self, run: FrameRun, key: np.ndarray) -> None:
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
        deliveries.rows.extend_columns(columns, len(rows))


def _ids_of(run: FrameRun, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the frame number within `rows` of each id, the ids) of the frames `rows`, in order."""
    counts = np.maximum(run.id_counts[rows], 0)
    starts = run.id_offsets[rows]
    total = int(counts.sum())
    frame_of = np.repeat(np.arange(len(rows)), counts)
    index = np.arange(total, dtype=np.int64) - (np.cumsum(counts) - counts)[frame_of]
    return frame_of, run.id_values[starts[frame_of] + index]


def _run_ids(runs: list, most: int) -> np.ndarray:
    """The first `most` ids of the ledger's ascending runs."""
    parts, left = [], most
    for first, last, _ in runs:
        if left <= 0:
            break
        take = min(left, last - first + 1)
        parts.append(np.arange(first, first + take, dtype=np.int64))
        left -= take
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _run_times(runs: list, most: int) -> np.ndarray:
    """The publish times of the first `most` ids of the runs."""
    parts, left = [], most
    for first, last, ts in runs:
        if left <= 0:
            break
        take = min(left, last - first + 1)
        parts.append(np.full(take, ts, dtype=np.int64))
        left -= take
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _drop_front(runs: Any, n: int) -> None:
    """The first `n` ids confirmed: off the front of the runs."""
    while n:
        run = runs[0]
        take = min(n, run[1] - run[0] + 1)
        run[0] += take
        n -= take
        if run[0] > run[1]:
            runs.popleft()

"""Credit ledger and stalls per (connection, subscription id).

Balance = initial credit from Subscribe + n per Credit - 1 per Deliver (credit counts chunks).
A stall is an interval with zero credit: from the Deliver that used the last credit to the
Credit that restores it. The broker demonstrably had more data to send during a stall when
the next Deliver follows the restoring Credit at once (within `at_once_ms`), or when the
stalling Deliver v2's committed chunk id is ahead of that chunk. A subscription whose
Subscribe was not captured has no known balance, so no stall is claimed for it.
Each known balance, after every frame that changes it, is a row of the credit_balance table
(kept unless `keep_balance` is off).

Hot frames as columns (`on_hot`): a subscription's Credit and Deliver frames of a run are
applied at once, the balance as a running sum, a stall opened by a Deliver that leaves no
credit and closed by a Credit that restores some.
"""

from __future__ import annotations

from array import array

import numpy as np

from streamdissect.analysis.compact import CompactRows
from streamdissect.analysis.fields import get
from streamdissect.protocols.stream.analysis import hot_input
from streamdissect.protocols.stream.hot import CREDIT_KEY, DELIVER_KEY, HotFrames
from streamdissect.slotted import Unequal

AT_ONCE_MS = 50.0
# credit_balance rows copied at once from a subscription's history into the table's rows
BALANCE_STEP = 1 << 16
# Credit's and Deliver's fields in hot frames, as hot_input.frames_of gives them
HOT_FIELDS = ("subscription_id", "credit", "record_count", "chunk_id", "committed_chunk_id")


class Stall:
    """One stall while it may still change (open, or waiting for the next Deliver); read and
    written like a dict. StallLog keeps the settled ones as columns."""

    FIELDS = ("connection", "subscription_id", "start_ns", "end_ns", "duration_ms", "ended_by",
              "broker_had_more")  # fmt: skip  (the stalls table's column order)
    __slots__ = FIELDS

    def __init__(self, connection: str, subscription_id: int, start_ns: int,
                 broker_had_more: bool) -> None:  # fmt: skip
        self.connection = connection
        self.subscription_id = subscription_id
        self.start_ns = start_ns
        self.end_ns: int | None = None
        self.duration_ms: float | None = None
        self.ended_by: str | None = None
        self.broker_had_more = broker_had_more

    def __getitem__(self, name: str):
        return getattr(self, name)

    def __setitem__(self, name: str, value) -> None:
        setattr(self, name, value)


ENDED_BY = (None, "credit", "unsubscribe", "connection_end", "capture_end")
NO_END = -(1 << 63)  # (an end_ns of None, in the log's array)


class StallLog:
    """A subscription's stalls in order: the last one as its Stall (it may still be open or
    wait for the next Deliver), the ones before it (settled: once a stall opens, the one
    before it has ended and its next Deliver was seen) as columns, 18 bytes a stall. Rows
    read back in the stalls table's order (Stall.FIELDS)."""

    __slots__ = ("_ended_by", "_ends", "_had_more", "_starts", "connection", "last",
                 "subscription_id")  # fmt: skip

    def __init__(self, connection: str, subscription_id: int) -> None:
        self.connection, self.subscription_id = connection, subscription_id
        self._starts, self._ends = array("q"), array("q")
        self._ended_by, self._had_more = array("b"), array("b")
        self.last: Stall | None = None

    def append(self, stall: Stall) -> None:
        if self.last is not None:
            self._settle(self.last)
        self.last = stall

    def _settle(self, last: Stall) -> None:
        end = NO_END if last.end_ns is None else last.end_ns
        try:
            self._starts.append(last.start_ns)
        except OverflowError:  # (a time past int64: Python ints from here on)
            self._starts = list(self._starts)
            self._starts.append(last.start_ns)
        try:
            self._ends.append(end)
        except OverflowError:
            self._ends = list(self._ends)
            self._ends.append(end)
        self._ended_by.append(ENDED_BY.index(last.ended_by))
        self._had_more.append(bool(last.broker_had_more))

    def extend_ended(self, starts: np.ndarray, ends: np.ndarray, had_more: np.ndarray,
                     last: Stall) -> None:  # fmt: skip
        """append() of stalls a Credit ended, settled (their next Deliver seen), as columns
        (int64 starts and ends, bool broker_had_more), then of `last`."""
        if self.last is not None:
            self._settle(self.last)
        for name, values in (("_starts", starts), ("_ends", ends)):
            kept = getattr(self, name)
            if kept.__class__ is array:
                kept.frombytes(values.astype(np.int64).tobytes())
            else:
                kept += values.tolist()
        self._ended_by.frombytes(bytes([ENDED_BY.index("credit")]) * len(starts))
        self._had_more.frombytes(had_more.astype(np.int8).tobytes())
        self.last = last

    def __len__(self) -> int:
        return len(self._starts) + (self.last is not None)

    def __bool__(self) -> bool:
        return self.last is not None

    def __getitem__(self, index):
        """Rows [start:stop] as tuples in Stall.FIELDS order (a JSON report's RowStream), or
        row i."""
        if not isinstance(index, slice):
            i = index + len(self) if index < 0 else index
            if not 0 <= i < len(self):
                raise IndexError(index)
            return self[i : i + 1][0]
        start, stop, step = index.indices(len(self))
        if step != 1:
            return self[start:stop][::step]
        c, s = self.connection, self.subscription_id
        rows = []
        for k in range(start, min(stop, len(self._starts))):
            start_ns, end_ns = self._starts[k], self._ends[k]
            end, ms = (None, None) if end_ns == NO_END else (end_ns, (end_ns - start_ns) / 1e6)
            rows.append((c, s, start_ns, end, ms, ENDED_BY[self._ended_by[k]],
                         bool(self._had_more[k])))  # fmt: skip
        if stop > len(self._starts) and self.last is not None:
            rows.append(tuple(getattr(self.last, name) for name in Stall.FIELDS))
        return rows

    def __iter__(self):
        step = 4096
        for at in range(0, len(self), step):
            yield from self[at : at + step]

    def column_slices(self, start: int, stop: int) -> list:
        """Rows [start, stop) as columns in Stall.FIELDS order (a JSON report's RowStream
        reads them so, without a tuple a row)."""
        settled = len(self._starts)
        lo, hi = min(start, settled), min(stop, settled)
        starts, ends = self._starts[lo:hi], self._ends[lo:hi]
        if starts.__class__ is array and ends.__class__ is array and NO_END not in ends:
            first, last = np.frombuffer(starts, dtype=np.int64), np.frombuffer(ends, dtype=np.int64)
            if not len(first) or min(first.min(), last.min()) >= 0:  # (end - start: exact)
                return self._columns(lo, hi, starts, ends, ((last - first) / 1e6).tolist(), stop)
        return [list(column) for column in zip(*self[start:stop])] or [[]] * len(Stall.FIELDS)

    def _columns(self, lo: int, hi: int, starts: array, ends: array, durations: list,
                 stop: int) -> list:  # fmt: skip
        n = hi - lo
        columns = [[self.connection] * n, [self.subscription_id] * n, starts, ends, durations,
                   [ENDED_BY[k] for k in self._ended_by[lo:hi]],
                   [bool(k) for k in self._had_more[lo:hi]]]  # fmt: skip
        if stop > hi and self.last is not None:  # (the last stall, an object: its None too)
            columns[2], columns[3] = starts.tolist(), ends.tolist()
            for column, name in zip(columns, Stall.FIELDS):
                column.append(getattr(self.last, name))
        return columns

    def __eq__(self, other) -> bool:  # (the same rows: two analyses of one capture agree)
        return isinstance(other, StallLog) and list(self) == list(other)

    __hash__ = None

    def stalled_ms(self) -> float:
        """The stalls' durations summed in order (an open one counts 0): the settled ones'
        from their columns by numpy's add.accumulate (one addition after the other, as
        sum() adds floats; not a tuple a stall), the rest row by row."""
        settled = len(self._starts)
        starts, ends = self._starts, self._ends
        if settled and starts.__class__ is array and ends.__class__ is array:
            first, last = np.frombuffer(starts, dtype=np.int64), np.frombuffer(ends, dtype=np.int64)
            ended = last != NO_END
            last = np.where(ended, last, first)  # (an open one: 0)
            if min(first.min(), last.min()) >= 0:  # (end - start: exact, as in column_slices)
                total = float(np.add.accumulate((last - first) / 1e6)[-1])
                return sum((row[4] or 0.0 for row in self[settled:]), total)
        return sum(row[4] or 0.0 for row in self)


class _Subscription(Unequal):
    """A subscription's credit and deliveries as they go."""

    __slots__ = field_names = ("connection", "subscription_id", "stream", "initial_credit",
                               "balance", "granted", "credit_frames", "chunks", "records",
                               "credit_errors", "cut_frames", "stalls", "open_stall",
                               "awaiting_deliver", "history")  # fmt: skip
    connection: str
    subscription_id: int
    stream: str | None
    initial_credit: int | None
    balance: int | None
    granted: int
    credit_frames: int
    chunks: int
    records: int
    credit_errors: int
    cut_frames: int  # its Subscribe and Deliver frames cut by the capture
    stalls: StallLog  # (made by __init__: it names the subscription)
    open_stall: Stall | None
    awaiting_deliver: Stall | None  # a just-ended stall waiting for the next Deliver
    # (time, balance) rows after each frame that changed a known balance (CompactRows: past
    # a few MB in a temporary file); None: not kept
    history: CompactRows | None

    def __init__(self, connection: str, subscription_id: int, stream: str | None = None,
                 initial_credit: int | None = None, balance: int | None = None,
                 granted: int = 0, credit_frames: int = 0, chunks: int = 0, records: int = 0,
                 credit_errors: int = 0, cut_frames: int = 0, open_stall: Stall | None = None,
                 awaiting_deliver: Stall | None = None,
                 history: CompactRows | None = None) -> None:  # fmt: skip
        self.connection = connection
        self.subscription_id = subscription_id
        self.stream = stream
        self.initial_credit = initial_credit
        self.balance = balance
        self.granted = granted
        self.credit_frames = credit_frames
        self.chunks = chunks
        self.records = records
        self.credit_errors = credit_errors
        self.cut_frames = cut_frames
        self.stalls = StallLog(connection, subscription_id)
        self.open_stall = open_stall
        self.awaiting_deliver = awaiting_deliver
        self.history = history

    def note(self, ts: int) -> None:
        """The balance after the frame at `ts` (a frame that changed it)."""
        if self.history is not None:
            self.history.append((ts, self.balance))

    def note_many(self, times, balances) -> None:
        """note() for numpy arrays of times and balances (int64)."""
        if self.history is not None and len(times):
            self.history.extend_columns([(times, None), (balances, None)], len(times))


class CreditCollector:
    def __init__(self, at_once_ms: float = AT_ONCE_MS, keep_balance: bool = True) -> None:
        self.at_once_ns = int(at_once_ms * 1e6)
        self.keep_balance = keep_balance
        self._subs: dict[tuple[str, int], _Subscription] = {}
        self._closed: list[_Subscription] = []
        # (connection, correlation id) -> subscription awaiting its Subscribe response
        self._pending_subscribe: dict[tuple[str, int], _Subscription] = {}

    def _sub(self, connection: str, sid: int) -> _Subscription:
        key = (connection, sid)
        sub = self._subs.get(key)
        if sub is None:
            sub = self._subs[key] = _Subscription(connection, sid)
            if self.keep_balance:
                sub.history = CompactRows(2)
        return sub

    def subscription(self, connection: str, sid: int | None) -> _Subscription:
        """The live ledger of (connection, subscription id), made when first named (as a
        Credit or Deliver for a subscription never seen subscribing makes it)."""
        return self._subs.get((connection, sid)) or self._sub(connection, sid)

    def on_subscribe(self, ev) -> None:
        rec = ev.record
        if getattr(rec, "response", None):
            sub = self._pending_subscribe.pop((ev.connection, getattr(rec, "correlation_id", None)), None)
            if sub is not None and getattr(rec, "code", None) != 1:
                # refused: this id's ledger is not live; keep the row for the record
                sub.balance = None
                if sub.history is not None:
                    sub.history.close()
                    sub.history = CompactRows(2)
            return
        sid = getattr(rec, "subscription_id", None)
        old = self._subs.pop((ev.connection, sid), None)
        if old is not None:
            self._end(old, ev.ts_ns, "unsubscribe")
        sub = self._sub(ev.connection, sid)
        credit = getattr(rec, "credit", None)
        sub.stream = getattr(rec, "stream", None)
        sub.cut_frames += bool(getattr(rec, "truncated", False))  # (its credit may be cut)
        sub.initial_credit = credit
        sub.balance = credit
        if credit is not None:
            sub.note(ev.ts_ns)
        self._pending_subscribe[(ev.connection, getattr(rec, "correlation_id", None))] = sub

    def on_credit(self, ev) -> None:
        rec = ev.record
        sid = getattr(rec, "subscription_id", None)
        sub = self._sub(ev.connection, sid)
        if getattr(rec, "response", None):  # 0x8009: only sent on error
            sub.credit_errors += 1
            return
        self._granted(sub, ev.ts_ns, getattr(rec, "credit", None) or 0)

    def credit(self, connection: str, ts: int, sid: int, credit: int) -> None:
        """A Credit request (on_credit without the record)."""
        self._granted(self._subs.get((connection, sid)) or self._sub(connection, sid), ts, credit)

    @staticmethod
    def _granted(sub: _Subscription, ts: int, credit: int) -> None:
        sub.granted += credit
        sub.credit_frames += 1
        if sub.balance is None:
            return
        sub.balance += credit
        sub.note(ts)
        if sub.open_stall is not None and sub.balance > 0:
            stall = sub.open_stall
            _end_by_credit(stall, ts)
            sub.open_stall = None
            sub.awaiting_deliver = stall

    def on_deliver(self, ev) -> None:
        rec = ev.record
        if getattr(rec, "truncated", False):  # (counts from its chunk header, if whole)
            self.subscription(ev.connection, getattr(rec, "subscription_id", None)).cut_frames += 1
        self.deliver(ev.connection, ev.ts_ns, getattr(rec, "subscription_id", None),
                     getattr(rec, "record_count", None), getattr(rec, "committed_chunk_id", None),
                     get(getattr(rec, "chunk", None), "chunk_id"))  # fmt: skip

    def deliver(self, connection: str, ts: int, sid: int, record_count: int | None,
                committed: int | None, chunk_id: int | None) -> None:  # fmt: skip
        sub = self._subs.get((connection, sid)) or self._sub(connection, sid)
        sub.chunks += 1
        sub.records += record_count or 0
        waiting = sub.awaiting_deliver
        if waiting is not None:
            if ts - waiting.end_ns <= self.at_once_ns:
                waiting.broker_had_more = True
            sub.awaiting_deliver = None
        if sub.balance is None:
            return
        sub.balance -= 1
        sub.note(ts)
        if sub.balance <= 0 and sub.open_stall is None:
            ahead = committed is not None and chunk_id is not None and committed > chunk_id
            sub.open_stall = Stall(connection, sub.subscription_id, ts, ahead)
            sub.stalls.append(sub.open_stall)

    def on_hot(self, run: HotFrames) -> None:
        """The Credit and Deliver frames of hot frames as columns, per subscription."""
        if hot_input.is_short(run):
            self._hot_one_by_one(run)
            return
        key = run.key
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
        for g in hot_input.groups(group, first_seen=True):
            mine = rows[group == g]
            sub = self.subscription(run.connections[g // 256], g % 256)
            _apply_columns(sub, self.at_once_ns, {
                "ts": run.ts_ns[mine], "amount": amount[mine], "records": records[mine],
                "ahead": ahead[mine], "credit": key[mine] == CREDIT_KEY})  # fmt: skip

    def _hot_one_by_one(self, run: HotFrames) -> None:
        has_committed = run.fields["committed_chunk_id"][1]
        for frame in hot_input.frames_of(run, (CREDIT_KEY, DELIVER_KEY), HOT_FIELDS):
            i, key, ts, connection, _, _, sid, amount, records, first, committed = frame
            if key == CREDIT_KEY:
                self.credit(connection, ts, sid, amount)
            else:
                self.deliver(connection, ts, sid, records, committed if has_committed[i] else None,
                             first)  # fmt: skip

    def on_unsubscribe(self, ev) -> None:
        rec = ev.record
        if getattr(rec, "response", None):
            return
        sub = self._subs.pop((ev.connection, getattr(rec, "subscription_id", None)), None)
        if sub is not None:
            self._end(sub, ev.ts_ns, "unsubscribe")

    def _end(self, sub: _Subscription, ts_ns: int, reason: str) -> None:
        if sub.open_stall is not None:
            stall = sub.open_stall
            stall["end_ns"] = ts_ns
            stall["ended_by"] = reason
            stall["duration_ms"] = (ts_ns - stall["start_ns"]) / 1e6
            sub.open_stall = None
        if sub.history is not None:  # (its balances are only read from now on)
            sub.history.spill()
        self._closed.append(sub)

    def end_connection(self, connection: str, ts_ns: int) -> None:
        for key in [k for k in self._subs if k[0] == connection]:
            self._end(self._subs.pop(key), ts_ns, "connection_end")

    def finish(self, capture_end_ns: int) -> None:
        for key in list(self._subs):
            self._end(self._subs.pop(key), capture_end_ns, "capture_end")

    def _all(self) -> list[_Subscription]:
        return self._closed + list(self._subs.values())

    def summary(self, stall_lists: bool = True) -> list[dict]:
        """One row a subscription, its stalls a list of dicts (`stall_lists` off: its
        StallLog, rows in Stall.FIELDS order read when asked)."""
        rows = []
        for sub in self._all():
            rows.append(
                {
                    "connection": sub.connection,
                    "subscription_id": sub.subscription_id,
                    "stream": sub.stream,
                    "initial_credit": sub.initial_credit,
                    "credits_granted": sub.granted,
                    "credit_frames": sub.credit_frames,
                    "chunks_delivered": sub.chunks,
                    "records_delivered": sub.records,
                    "credit_errors": sub.credit_errors,
                    "final_credit": sub.balance,
                    "stall_count": len(sub.stalls),
                    "stalled_ms_total": sub.stalls.stalled_ms(),
                    "cut_frames": sub.cut_frames,
                    "stalls": sub.stalls if not stall_lists else [
                        {"start_ns": s[2], "end_ns": s[3], "duration_ms": s[4]}
                        for s in sub.stalls
                    ],
                }
            )  # fmt: skip
        return rows

    def balance_rows(self) -> CompactRows:
        """The credit_balance table's rows (CompactRows: tuples in schema order), subscription
        by subscription as in summary(), each in capture order (copied BALANCE_STEP rows at
        a time: a long capture's balances are never all in memory at once)."""
        rows = CompactRows(4)
        for sub in self._all():
            history = sub.history
            if history is None:
                continue
            for at in range(0, len(history), BALANCE_STEP):
                stop = min(at + BALANCE_STEP, len(history))
                times, balances = map(_int64s, history.column_slices(at, stop))
                n = stop - at
                rows.extend_columns([(times, None), ([sub.connection] * n, None),
                                     ([sub.subscription_id] * n, None), (balances, None)], n)
        return rows

    def stall_rows(self) -> StallRows:
        """The stalls table's rows (tuples in its column order), read when asked."""
        return StallRows([sub.stalls for sub in self._all()])


class StallRows:
    """Every subscription's StallLog as one sequence of rows (len, index, slice, iteration),
    none made before it is read."""

    def __init__(self, logs: list[StallLog]) -> None:
        self._logs = [log for log in logs if log]
        self._n = sum(map(len, self._logs))

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index):
        if not isinstance(index, slice):
            i = index + self._n if index < 0 else index
            if not 0 <= i < self._n:
                raise IndexError(index)
            return self[i : i + 1][0]
        start, stop, step = index.indices(self._n)
        rows, at = [], 0
        for log in self._logs:
            if at + len(log) > start and at < stop:
                rows += log[max(start - at, 0) : stop - at]
            at += len(log)
        return rows if step == 1 else rows[::step]

    def __iter__(self):
        for log in self._logs:
            yield from log


def _int64s(values) -> np.ndarray | list:
    """A column read back from CompactRows as an int64 array (a list when a value does not
    fit one: a time past int64)."""
    if isinstance(values, array) and values.typecode == "q":
        return np.frombuffer(values, dtype=np.int64)
    try:
        return np.array(values, dtype=np.int64)
    except (OverflowError, TypeError, ValueError):
        return list(values)


def _apply_columns(sub: _Subscription, at_once_ns: int, run: dict) -> None:
    """Credit requests and Delivers of one subscription, in order (columns: ts, amount,
    records, ahead, credit), as CreditCollector's _granted and deliver apply them one by one."""
    is_credit = run["credit"]
    is_deliver = ~is_credit
    ts = run["ts"]
    sub.granted += int(run["amount"][is_credit].sum())
    sub.credit_frames += int(np.count_nonzero(is_credit))
    sub.chunks += int(np.count_nonzero(is_deliver))
    sub.records += int(run["records"][is_deliver].sum())
    delivers = np.flatnonzero(is_deliver)
    if sub.awaiting_deliver is not None and len(delivers):  # (a stall ended before this run)
        if ts[delivers[0]] - sub.awaiting_deliver.end_ns <= at_once_ns:
            sub.awaiting_deliver.broker_had_more = True
        sub.awaiting_deliver = None
    if sub.balance is None:  # no Subscribe seen (or refused): no balance, no stall
        return
    balance = sub.balance + np.cumsum(np.where(is_credit, run["amount"], -1))
    sub.note_many(ts, balance)
    opens = is_deliver & (balance <= 0)
    closes = is_credit & (balance > 0)
    decisive = np.flatnonzero(opens | closes)
    kind = opens[decisive]  # True: a Deliver that leaves no credit; False: a Credit restoring
    before = np.r_[sub.open_stall is not None, kind[:-1]]
    turns = decisive[kind != before]  # where a stall opens or closes (the others change none)
    sub.balance = int(balance[-1])
    if not len(turns):
        return
    # the Deliver after each turn (an index into `delivers`; len(delivers): none in this run)
    following = np.searchsorted(delivers, turns, side="right")
    # (a turn alternates: the first closes the stall open before the run, if one is)
    first_open = int(sub.open_stall is not None)
    if first_open:
        stall = sub.open_stall
        _end_by_credit(stall, int(ts[turns[0]]))
        sub.open_stall = None
        nxt = int(following[0])
        if nxt == len(delivers):
            sub.awaiting_deliver = stall  # (the next Deliver comes in a later run)
        elif ts[delivers[nxt]] - stall.end_ns <= at_once_ns:
            stall.broker_had_more = True
    opens, closes = turns[first_open::2], turns[first_open + 1 :: 2]
    if len(opens):
        _stalls_of_run(sub, at_once_ns, ts, delivers, run["ahead"], opens, closes,
                       following[first_open + 1 :: 2])  # fmt: skip


def _end_by_credit(stall: Stall, ts: int) -> None:
    stall.end_ns = ts
    stall.ended_by = "credit"
    stall.duration_ms = (ts - stall.start_ns) / 1e6


def _stalls_of_run(sub: _Subscription, at_once_ns: int, ts: np.ndarray, delivers: np.ndarray,
                   ahead: np.ndarray, opens: np.ndarray, closes: np.ndarray,
                   following: np.ndarray) -> None:  # fmt: skip
    """The stalls opened in a run (at `opens`, each but the last closed at `closes`, the last
    perhaps too; `following`: the Deliver after each close, len(delivers) for none), onto the
    subscription's StallLog: broker_had_more where the stalling Deliver's committed chunk is
    ahead or the next Deliver follows the close at once."""
    starts, ends = ts[opens], ts[closes]
    had_more = ahead[opens].astype(bool)
    has_next = following < len(delivers)
    next_ts = ts[delivers[np.minimum(following, len(delivers) - 1)]]  # (opens are Delivers)
    had_more[: len(closes)] |= has_next & (next_ts - ends <= at_once_ns)
    last = Stall(sub.connection, sub.subscription_id, int(starts[-1]), bool(had_more[-1]))
    if len(closes) == len(opens):
        _end_by_credit(last, int(ends[-1]))
        if not has_next[-1]:
            sub.awaiting_deliver = last  # (the next Deliver comes in a later run)
    else:
        sub.open_stall = last
    settled = len(opens) - 1
    sub.stalls.extend_ended(starts[:settled], ends[:settled], had_more[:settled], last)

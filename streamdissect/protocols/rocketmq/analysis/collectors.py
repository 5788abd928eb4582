"""RocketMQ's collectors as one set: which collector sees which frame, in what order, and
which tables each makes. analysis.driver feeds it the frame events of RocketMQ's connections.

Every command goes first to the call collector (it pairs a response with its request, which
the others then read as `calls.answered`), a response then to the errors collector, and a
request to the collectors of its code, a response to those of its request's code (the
framer's `request_code`). A frame whose header could not be read goes nowhere.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.analysis import pull_path, send_runs
from streamdissect.protocols.rocketmq.analysis.brokers import BrokerCollector
from streamdissect.protocols.rocketmq.analysis.calls import CallCollector
from streamdissect.protocols.rocketmq.analysis.clients import ClientCollector
from streamdissect.protocols.rocketmq.analysis.connections import ConnectionCollector
from streamdissect.protocols.rocketmq.analysis.errors import ErrorCollector
from streamdissect.protocols.rocketmq.analysis.offsets import OffsetCollector
from streamdissect.protocols.rocketmq.analysis.pulls import PullCollector
from streamdissect.protocols.rocketmq.analysis.sends import SendCollector
from streamdissect.protocols.rocketmq.hot import HotAnswer, HotPull, HotPulled, HotRun, HotSend
from streamdissect.protocols.rocketmq.records import RemotingCommand

_RESPONSE, _SEND_CODES = spec.RESPONSE_FLAG, spec.SEND_CODES
# light records the collectors take as commands (they read what a command has of them)
_AS_COMMANDS = (HotAnswer, HotPulled, HotPull)
# hot sends and answers gathered before a run is taken (send_runs.py): a bound on the
# events held (each holds its frame)
RUN = 1024

# The collector (attribute of Collectors) that makes each table.
MADE_BY = {"rocketmq_connections": "connections", "rocketmq_requests": "calls",
           "rocketmq_latency": "calls",
           "rocketmq_errors": "errors", "rocketmq_sends": "sends", "rocketmq_pulls": "pulls",
           "rocketmq_offsets": "offsets", "rocketmq_clients": "clients",
           "rocketmq_broker_registrations": "brokers"}  # fmt: skip


class Collectors:
    hot_class = None  # (RocketMQ has no fast path: no frames come as columns)

    def __init__(self, keep_call_rows: bool = True) -> None:
        self.calls = calls = CallCollector(keep_rows=keep_call_rows)
        self.clients = ClientCollector()
        self.connections = ConnectionCollector()
        self.errors = ErrorCollector(calls)  # (these read `calls.answered`)
        self.sends = SendCollector(calls)
        self.pulls = PullCollector(calls)
        self.offsets = OffsetCollector(calls)
        self.brokers = BrokerCollector(calls)
        # the collectors fed (None: all); the others are left empty. The call collector
        # is always fed: the others take a response's request from it.
        self.active: tuple | None = None
        # what a request of a code, a response to a request of a code, goes to
        self._by_request: dict[int, tuple] = {}
        self._by_response: dict[int | None, tuple] = {}  # (code 0: no error to count)
        self._by_error_response: dict[int | None, tuple] = {}
        # the hot sends and answers not taken yet (send_runs.py): taken before any other
        # command, at the end and when a table is read
        self._run: list = []
        # a light pull's and its answer's handlers when runs are taken (pull_path.py)
        self._on_pull, self._on_pulled = pull_path.bound(self)
        self.run_parts = send_runs.parts(self)  # (what take_run reads of them)

    @classmethod
    def made(cls, report_only: bool = False,
             tables: Collection[str] | None = None) -> Collectors:  # fmt: skip
        """The set for one capture. `report_only`: keep only what the analyze report shows
        (no row a call: the requests table stays empty unless `tables` names it). `tables`:
        feed only the collectors these tables need."""
        asked = tables is not None and "rocketmq_requests" in tables
        c = cls(keep_call_rows=not report_only or asked)
        if tables is not None:
            wanted = {MADE_BY[t] for t in tables if t in MADE_BY} | {"calls"}
            c.active = tuple(getattr(c, name) for name in wanted)
        return c

    def _requests_of(self, code: int) -> tuple:
        c = self
        if code in spec.SEND_CODES:
            return (c.sends.on_request,)
        return {spec.PULL_CODE: (c.pulls.on_request, c.offsets.on_commit),
                spec.UPDATE_OFFSET_CODE: (c.offsets.on_commit,),
                spec.HEARTBEAT_CODE: (c.clients.on_heartbeat,),
                spec.UNREGISTER_CLIENT_CODE: (c.clients.on_unregister,),
                spec.REGISTER_BROKER_CODE: (c.brokers.on_request,),
                spec.UNREGISTER_BROKER_CODE: (c.brokers.on_request,)}.get(code, ())  # fmt: skip

    def _responses_to(self, code: int | None) -> tuple:
        c = self
        if code in spec.SEND_CODES:
            return (c.sends.on_response,)
        return {spec.PULL_CODE: (c.pulls.on_response, c.offsets.on_max_offset),
                spec.QUERY_OFFSET_CODE: (c.offsets.on_query_response,),
                spec.MAX_OFFSET_CODE: (c.offsets.on_max_offset,),
                spec.REGISTER_BROKER_CODE: (c.brokers.on_response,),
                spec.UNREGISTER_BROKER_CODE: (c.brokers.on_response,)}.get(code, ())  # fmt: skip

    def handlers(self, record: object) -> tuple[tuple, bool]:
        """(what to call for this frame, in order; whether every record of its class gets
        the same: yes, a command goes to `on_command`, which picks its collectors by its
        code, a send request read light (hot.HotSend) to the sends' and calls' collectors,
        and a frame that is no command goes nowhere). For the analyze report (no row a
        call, every collector fed) a light send and a light answer to one are gathered
        into a run (`on_hot`), taken a run at a time (send_runs.py)."""
        cls = record.__class__
        if cls is HotRun:
            return ((self.on_run,) if self.runs else (self.each_of_run,)), True
        if (cls is HotSend or cls is HotAnswer) and self.runs:
            return (self.on_hot,), True
        if cls is HotPull and self.runs:  # (and their answers: in one step, pull_path.py)
            return (self._on_pull,), True
        if cls is HotPulled and self.runs:
            return (self._on_pulled,), True
        if cls is RemotingCommand or cls in _AS_COMMANDS:  # (light: as one)
            return (self.on_command,), True
        if cls is HotSend:
            return self._fed((self.calls.on_hot_send, self.connections.on_frame,
                              self.sends.on_hot_send)), True  # fmt: skip
        return (), True

    @property
    def runs(self) -> bool:
        """Whether light sends and their answers are taken a run at a time (send_runs.py:
        every collector fed, no row a call)."""
        return self.active is None and not self.calls.keeps_rows

    def on_hot(self, ev: object) -> None:
        """A light send or its answer, gathered into the run (taken past RUN of them); an
        answer to another request than a send's (which the walk does not read light) as a
        command."""
        rec = ev.record
        if rec.__class__ is HotAnswer and rec.request_code not in _SEND_CODES:
            self.on_command(ev)
            return
        run = self._run
        run.append(ev)
        if len(run) >= RUN:
            self.take_run()

    def on_run(self, ev: HotRun) -> None:
        """A run of light sends and answers to sends (hot.joined_runs), gathered (and let go
        by the run: the driver holds its last event while the next block is read)."""
        run = self._run
        run += ev.events
        ev.events = None
        if len(run) >= RUN:
            self.take_run()

    def each_of_run(self, ev: HotRun) -> None:
        """A run's events, each as the driver gives a frame event (no run gathered)."""
        for frame in ev.events:
            handlers, _ = self.handlers(frame.record)
            for handler in handlers:
                handler(frame)

    def take_run(self) -> None:
        """The gathered light sends and answers taken (before anything else is)."""
        run, self._run = self._run, []
        if len(run) <= RUN:
            send_runs.take_run(self, run)
            return
        for at in range(0, len(run), RUN):  # (a joined run may be longer)
            send_runs.take_run(self, run[at : at + RUN])

    def settle_runs(self) -> None:
        """The run gathered taken, and the runs' rows and latencies given to their tables
        (send_runs.settle)."""
        if self._run:
            self.take_run()
        send_runs.settle(self)

    def one_at_a_time(self, run: list) -> None:
        """A run's light sends and answers given to the collectors frame by frame, as when
        no run is gathered (the reference; send_runs.py's way where a run may reach a bound)."""
        calls, connections, sends, command = self.calls, self.connections, self.sends, self.command
        for ev in run:
            if ev.record.__class__ is HotSend:
                calls.on_hot_send(ev)
                connections.on_frame(ev)
                sends.on_hot_send(ev)
            else:
                command(ev)

    def on_command(self, ev: object) -> None:
        """A command (after the run gathered before it) to the collectors of its code."""
        if self._run:
            self.take_run()
        send_runs.settle(self)
        self.command(ev)

    def command(self, ev: object) -> None:
        """A command to the collectors of its code (the driver looks up no handlers a frame:
        this is the one lookup, by the code alone)."""
        rec = ev.record
        if rec.flag & _RESPONSE:
            # (the errors' collector counts the responses of a code other than 0 alone: the
            # others are not passed to it, one call a response fewer)
            by_code = self._by_error_response if rec.code else self._by_response
            handlers = by_code.get(rec.request_code)
            if handlers is None:
                errors = (self.errors.on_response,) if rec.code else ()
                handlers = by_code[rec.request_code] = self._fed(
                    (self.calls.on_frame, self.connections.on_frame) + errors
                    + self._responses_to(rec.request_code))  # fmt: skip
        else:
            handlers = self._by_request.get(rec.code)
            if handlers is None:
                handlers = self._by_request[rec.code] = self._fed(
                    (self.calls.on_frame, self.connections.on_frame)
                    + self._requests_of(rec.code))  # fmt: skip
        for handler in handlers:
            handler(ev)

    def _fed(self, handlers: tuple) -> tuple:
        if self.active is None:
            return handlers
        return tuple(h for h in handlers if any(h.__self__ is c for c in self.active))

    def hot_handlers(self) -> tuple[Callable, ...]:
        return ()  # (RocketMQ has no fast path: its frames come as frame events)

    def finish(self, tcp_connections: list, end_ns: int) -> None:
        """The run gathered taken; nothing to close: a call still open at the end stays
        open in its tables."""
        self.settle_runs()

    def sources(self, tcp_connections: list) -> dict[str, Callable]:
        """Each table's rows (dicts), made when called."""
        self.settle_runs()
        c = self
        return {
            "rocketmq_connections": lambda: c.connections.rows(tcp_connections),
            "rocketmq_requests": c.calls.rows,
            "rocketmq_latency": c.calls.summary,
            "rocketmq_errors": c.errors.rows,
            "rocketmq_sends": c.sends.rows,
            "rocketmq_pulls": c.pulls.rows,
            "rocketmq_offsets": c.offsets.rows,
            "rocketmq_clients": c.clients.rows,
            "rocketmq_broker_registrations": c.brokers.rows,
        }

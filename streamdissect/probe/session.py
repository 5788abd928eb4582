"""One Stream connection driven by the codec: the handshake (PeerProperties, SASL, Tune,
Open), calls with correlation ids, heartbeats while connected, Close.

Every frame sent is built with `make_record` and `encode_record`; every frame read is
`decode_frame`d. A frame is read only once its size is known to be within the frame limit
(the user's before Tune, the negotiated one after), so a hostile length field costs nothing.
One thread, no background task: heartbeats are sent from the read loop whenever nothing was
sent for the negotiated interval.
"""

from __future__ import annotations

import math
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from streamdissect.probe.errors import ProbeError
from streamdissect.probe.uri import Target
from streamdissect.probe.wire import TlsOptions, Wire
from streamdissect.protocols.stream import decode_frame, encode_record, make_record, message_spec
from streamdissect.protocols.stream.codes import RESPONSE_BIT, ResponseCode, code_name
from streamdissect.protocols.stream.records import Malformed, Unknown

OK = ResponseCode.OK
DEFAULT_FRAME_MAX = 1_048_576  # the broker's own default
UNLIMITED_FRAME_CAP = 8 * 1_048_576  # what we read when both sides say "no limit" (0)
MAX_UNASKED = 10_000  # frames kept that no step asked for (a flood is an error, not memory)
CLIENT_PROPERTIES = {
    "product": "streamdissect probe",
    "platform": f"Python {platform.python_version()}",
    "connection_name": "streamdissect-probe",
}

Match = Callable[[object], bool]


@dataclass(frozen=True)
class Limits:
    frame_max: int = DEFAULT_FRAME_MAX  # bytes: offered in Tune and enforced (0: the broker's)
    heartbeat: int = 60  # seconds (0: the broker's)
    timeout: float = 5.0  # seconds, every step


@dataclass
class Reply:
    record: object  # the decoded response
    rtt_ms: float
    quirk: str | None = None  # how the broker's answer departs from the protocol, if it does


def negotiate(offer: int, limit: int) -> int:
    """Tune: the smaller of the two, where 0 means no limit."""
    if offer == 0 or limit == 0:
        return max(offer, limit)
    return min(offer, limit)


@dataclass
class Connector:
    """What every connection of one probe shares; keeps the wires for --pcap."""

    target: Target
    limits: Limits = field(default_factory=Limits)
    tls: TlsOptions | None = None
    client_properties: dict | None = None
    wires: list[Wire] = field(default_factory=list)

    def open(self) -> Session:
        wire = Wire.open(self.target, self.limits.timeout, self.tls)
        self.wires.append(wire)
        session = Session(wire, self.limits)
        try:
            session.handshake(self.target, self.client_properties,
                              external=bool(self.tls and self.tls.certfile))  # fmt: skip
        except BaseException:
            session.abort()
            raise
        return session


class Session:
    def __init__(self, wire: Wire, limits: Limits) -> None:
        self.wire, self.limits = wire, limits
        self._buffer = bytearray()
        self._unasked: list = []  # frames read while waiting for something else
        self._correlation_id = 0
        self.frame_max = limits.frame_max or DEFAULT_FRAME_MAX  # the read limit until Tune
        self.heartbeat = 0  # negotiated, seconds
        self._last_sent = time.monotonic()
        self.heartbeats_sent = self.heartbeats_received = 0
        # what the handshake learns
        self.server_properties: dict = {}
        self.mechanisms: list[str] = []
        self.mechanism: str | None = None
        self.tune_offer: dict | None = None
        self.tune: dict | None = None
        self.connection_properties: dict = {}
        self.handshake_ms: float | None = None
        self.replies: dict[str, Reply] = {}  # handshake responses, by command

    # --- the handshake ------------------------------------------------------------------

    def handshake(self, target: Target, client_properties: dict | None = None,
                  external: bool = False) -> None:  # fmt: skip
        started = time.perf_counter_ns()
        reply = self.expect_ok("PeerProperties", "peer_properties",
                               properties=client_properties or CLIENT_PROPERTIES)  # fmt: skip
        self.server_properties = dict(reply.record.properties or {})
        reply = self.expect_ok("SaslHandshake", "sasl_handshake")
        self.mechanisms = list(reply.record.mechanisms or [])
        self._authenticate(target, external)
        self._tune()
        reply = self.call("Open", "open", virtual_host=target.vhost)
        if reply.record.code != OK:
            raise ProbeError("open", f"virtual host {target.vhost!r} refused: "
                             f"{describe_code(reply.record.code)}", "auth")  # fmt: skip
        self.replies["Open"] = reply
        self.connection_properties = dict(reply.record.connection_properties or {})
        self.handshake_ms = (time.perf_counter_ns() - started) / 1e6

    def _authenticate(self, target: Target, external: bool) -> None:
        step = "sasl_authenticate"
        wanted = "EXTERNAL" if external else "PLAIN"
        if wanted not in self.mechanisms:
            why = "a client certificate was given, but " if external else ""
            raise ProbeError("sasl_handshake", f"{why}the broker does not offer {wanted} "
                             f"(it offers {', '.join(self.mechanisms) or 'nothing'})",
                             "auth")  # fmt: skip
        self.mechanism = wanted
        if external:  # the broker takes the user from the certificate
            sasl, shown = b"", None
        else:
            user, password = target.username.encode(), target.password.encode()
            sasl = b"\0" + user + b"\0" + password
            shown = {"sasl_data": b"\0" + user + b"\0" + b"*" * len(password)}
        try:
            reply = self.call("SaslAuthenticate", step, mechanism=wanted, sasl_data=sasl,
                              shown=shown)  # fmt: skip
        except ProbeError as exc:
            if exc.kind == "closed":  # (3.10.8's stream plugin does that on EXTERNAL)
                raise ProbeError(
                    step,
                    f"the broker closed the connection instead of answering "
                    f"SASL {wanted} ({self.server_text()})",
                    "auth",
                ) from None
            raise
        code = reply.record.code
        if code == ResponseCode.SASL_CHALLENGE:
            raise ProbeError(step, f"the broker sent a SASL challenge, which {wanted} never "
                             "needs", "auth")  # fmt: skip
        if code != OK:
            who = "the client certificate" if external else f"user {target.username!r}"
            raise ProbeError(step, f"authentication failed for {who}: {describe_code(code)}",
                             "auth")  # fmt: skip

    def _tune(self) -> None:
        tune = self.wait("tune", lambda r: r.command == "Tune" and not r.response)
        self.tune_offer = {"frame_max": tune.frame_max, "heartbeat": tune.heartbeat}
        frame_max = negotiate(tune.frame_max, self.limits.frame_max)
        heartbeat = negotiate(tune.heartbeat, self.limits.heartbeat)
        self.tune = {"frame_max": frame_max, "heartbeat": heartbeat}
        # the client's echo uses the request key 0x0014, as rstream and rbfly send it
        self.send("Tune", "tune", frame_max=frame_max, heartbeat=heartbeat)
        self.frame_max = frame_max or UNLIMITED_FRAME_CAP
        self.heartbeat = heartbeat

    def server_text(self) -> str:
        props = self.server_properties
        return f"{props.get('product', 'broker')} {props.get('version', '(version unknown)')}"

    # --- sending and calling -------------------------------------------------------------

    def send(self, command: str, step: str, *, version: int = 1, shown: dict | None = None,
             **fields) -> None:  # fmt: skip
        """Encode and send one frame. `shown`: fields replaced in what --pcap keeps."""
        data = encode_record(make_record(command, version=version, **fields))
        kept = None
        if shown:
            kept = encode_record(make_record(command, version=version, **(fields | shown)))
        self._send(data, step, kept)

    def _send(self, data: bytes, step: str, kept: bytes | None = None) -> None:
        self.wire.send(data, step, time.monotonic() + self.limits.timeout, kept)
        self._last_sent = time.monotonic()

    def call(self, command: str, step: str, *, timeout: float | None = None,
             version: int = 1, shown: dict | None = None, **fields) -> Reply:  # fmt: skip
        """Send a request with the next correlation id; its response and round-trip time."""
        self._correlation_id += 1
        corr = self._correlation_id
        started = time.perf_counter_ns()
        self.send(command, step, version=version, shown=shown, correlation_id=corr, **fields)
        key = message_spec(command).key
        record = self.wait(step, lambda r: (r.key & ~RESPONSE_BIT) == key
                           and getattr(r, "correlation_id", None) == corr, timeout)  # fmt: skip
        rtt_ms = (time.perf_counter_ns() - started) / 1e6
        quirk = None
        if not record.key & RESPONSE_BIT:  # 3.10.8 answers Route and Partitions so
            quirk = f"answered with key 0x{record.key:04x}, without the response bit"
            record = as_response(record)
        if isinstance(record, Malformed | Unknown):
            raise ProbeError(step, f"the {command} response does not decode: "
                             f"{getattr(record, 'reason', 'unknown version')}")  # fmt: skip
        reply = Reply(record, rtt_ms, quirk)
        if command in ("PeerProperties", "SaslHandshake", "SaslAuthenticate"):
            self.replies[command] = reply
        return reply

    def expect_ok(self, command: str, step: str, **fields) -> Reply:
        reply = self.call(command, step, **fields)
        if reply.record.code != OK:
            raise ProbeError(step, f"{command} refused: {describe_code(reply.record.code)}")
        return reply

    # --- reading ---------------------------------------------------------------------------

    def wait(self, step: str, match: Match, timeout: float | None = None):
        """The first frame `match` accepts (frames asked for by nobody are kept for later
        waits); ProbeError when none comes within the timeout."""
        timeout = self.limits.timeout if timeout is None else timeout
        record = self.read_until(step, match, time.monotonic() + timeout)
        if record is None:
            raise ProbeError(step, f"no answer within {timeout:g} s", "timeout")
        return record

    def read_until(self, step: str, match: Match, deadline: float):
        """Like wait, but None at the deadline (idle periods use it to keep heartbeats)."""
        for i, record in enumerate(self._unasked):
            if match(record):
                return self._unasked.pop(i)
        while True:
            record = self._next_record(step)
            if record is None:
                now = time.monotonic()
                if now >= deadline:
                    return None
                due = self._last_sent + self.heartbeat if self.heartbeat else math.inf
                if due <= now:
                    self.heartbeats_sent += 1
                    self._send(encode_record(make_record("Heartbeat")), step)
                    continue
                data = self.wire.recv(step, min(deadline, due))
                if data:
                    self._buffer += data
                continue
            if match(record):
                return record
            if not self._handled(step, record):
                if len(self._unasked) >= MAX_UNASKED:
                    raise ProbeError(step, f"the broker sent more than {MAX_UNASKED} frames "
                                     "nobody asked for")  # fmt: skip
                self._unasked.append(record)

    def take_unasked(self, match: Match) -> list:
        """Remove and return the kept frames `match` accepts."""
        taken = [r for r in self._unasked if match(r)]
        self._unasked = [r for r in self._unasked if not match(r)]
        return taken

    def _next_record(self, step: str):
        buffer = self._buffer
        if len(buffer) < 4:
            return None
        size = int.from_bytes(buffer[:4], "big")
        if size > self.frame_max:
            raise ProbeError(step, f"the broker sent a frame of {size} bytes, above the frame "
                             f"limit of {self.frame_max} bytes")  # fmt: skip
        if len(buffer) < 4 + size:
            return None
        frame = bytes(buffer[: 4 + size])
        del buffer[: 4 + size]
        return decode_frame(frame)

    def _handled(self, step: str, record) -> bool:
        """Heartbeats are counted, the broker's Close answered (then ProbeError), and a
        frame that does not decode is an error."""
        if isinstance(record, Malformed | Unknown):
            what = getattr(record, "reason", None) or "unknown command key or version"
            raise ProbeError(step, f"the broker sent a frame that is not the Stream protocol "
                             f"(key 0x{record.key:04x}: {what})")  # fmt: skip
        if record.command == "Heartbeat":
            self.heartbeats_received += 1
            return True
        if record.command == "Close" and not record.response:
            code = record.closing_code
            try:
                self.send("Close", step, response=True, correlation_id=record.correlation_id)
            except ProbeError:
                pass
            self.abort("server")
            refused = code == ResponseCode.UNKNOWN_FRAME
            raise ProbeError(step, f"the broker closed the connection: {describe_code(code)}"
                             f" ({record.closing_reason!r})", "refused" if refused else "closed",
                             closing_code=code)  # fmt: skip
        return False

    # --- the end ---------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self.wire.closed_ns is not None

    def idle(self, seconds: float, step: str = "idle") -> None:
        """Stay connected for `seconds`, sending and counting heartbeats."""
        self.read_until(step, lambda r: False, time.monotonic() + seconds)

    def close(self) -> None:
        """The protocol Close (code 1, "OK"), its answer, then the socket."""
        if self.closed:
            return
        try:
            reply = self.call("Close", "close", closing_code=1, closing_reason="OK")
            if reply.record.code != OK:
                raise ProbeError("close", f"Close answered {describe_code(reply.record.code)}")
        finally:
            self.abort()

    def abort(self, by: str = "client") -> None:
        """Close the socket, no protocol Close."""
        self.wire.close(by)


def as_response(record):
    """A response the broker sent under its request key, decoded as the response it is: the
    same bytes with the key's response bit set (a Record encodes back to exactly the bytes it
    was decoded from; a Malformed one keeps them)."""
    frame = bytearray(record.raw if isinstance(record, Malformed) else encode_record(record))
    frame[4] |= RESPONSE_BIT >> 8  # (the key's high byte: the frame's 5th byte)
    return decode_frame(bytes(frame))


def describe_code(code: int | None) -> str:
    return "no code" if code is None else f"code 0x{code:02x} {code_name(code)}"

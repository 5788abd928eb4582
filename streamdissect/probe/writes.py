"""The --allow-writes round trip: a temporary stream `streamdissect-probe-<random>`, one
message at a time published, confirmed and delivered back (confirm lag and delivery latency
per message), then the stream deleted, also when interrupted or when the connection broke.
When a step fails (the broker went away, say), that step is the error the user is told, and
the stream is deleted once the broker answers again (for up to DELETE_PATIENCE_S), else
named for the user to delete by hand."""

from __future__ import annotations

import itertools
import secrets
import time
from collections.abc import Callable

from streamdissect.analysis.fields import pair
from streamdissect.analysis.percentiles import summarize_ms
from streamdissect.probe.errors import ProbeError
from streamdissect.probe.session import Connector, Session, describe_code
from streamdissect.protocols.stream.codes import OffsetType, ResponseCode

PREFIX = "streamdissect-probe-"
# How long a failed round trip waits for the broker to come back to delete its stream (a
# broker restarting takes some 10-30 s); an interrupt does not wait.
DELETE_PATIENCE_S = 90.0
RETRY_EVERY_S = 1.0
PUBLISHER_ID = SUBSCRIPTION_ID = 0
# what the round trip waits for; anything else is kept by the session
AWAITED = frozenset(("PublishConfirm", "PublishError", "Deliver", "MetadataUpdate"))


def temporary_name() -> str:
    return PREFIX + secrets.token_hex(4)


def p50_max(values_ms: list[float]) -> dict:
    stats = summarize_ms(values_ms)
    return {"p50": stats["p50_ms"], "max": stats["max_ms"]}


def round_trip(connector: Connector, session: Session, messages: int,
               status: Callable[[str], None]) -> tuple[Session, dict]:  # fmt: skip
    """The session to go on with (a new one if the stream was deleted on another) and the
    result: stream, messages, confirmed, delivered, confirm_ms, delivery_ms, deleted."""
    name = temporary_name()
    result = {"stream": name, "messages": messages, "confirmed": 0, "delivered": 0,
              "confirm_ms": None, "delivery_ms": None, "deleted": False}  # fmt: skip
    reply = session.call("Create", "create", stream=name, arguments={})
    if reply.record.code != ResponseCode.OK:
        raise ProbeError("create", f"cannot create the temporary stream {name}: "
                         f"{describe_code(reply.record.code)}")  # fmt: skip
    status(f"created the temporary stream {name}")
    try:
        _exchange(session, name, messages, result)
    except ProbeError as failure:
        try:
            _delete(connector, session, name, DELETE_PATIENCE_S, status)
        except ProbeError as cleanup:  # (the step that failed stays the error)
            raise ProbeError(failure.step, f"{failure.message}; {cleanup.message}",
                             failure.kind, failure.closing_code) from None  # fmt: skip
        status(f"deleted the temporary stream {name}")
        raise
    except BaseException:  # an interrupt: deleted at once, or named
        _delete(connector, session, name)
        status(f"deleted the temporary stream {name}")
        raise
    session = _delete(connector, session, name)
    result["deleted"] = True
    status(f"deleted the temporary stream {name}")
    return session, result


def _exchange(session: Session, name: str, messages: int, result: dict) -> None:
    session.expect_ok(
        "Subscribe",
        "subscribe",
        subscription_id=SUBSCRIPTION_ID,
        stream=name,
        offset_type=OffsetType.FIRST,
        offset=None,
        credit=1,
        properties={},
    )
    session.expect_ok("DeclarePublisher", "declare_publisher", publisher_id=PUBLISHER_ID,
                      publisher_reference="", stream=name)  # fmt: skip
    confirm_ms, delivery_ms = [], []
    for publishing_id in range(1, messages + 1):
        body = f"streamdissect probe message {publishing_id}".encode()
        sent = time.perf_counter_ns()
        session.send(
            "Publish",
            "publish",
            publisher_id=PUBLISHER_ID,
            messages=[{"publishing_id": publishing_id, "filter_value": None, "entry": body}],
        )
        confirmed = delivered = None
        while confirmed is None or delivered is None:
            step = "publish_confirm" if confirmed is None else "deliver"
            record = session.wait(step, lambda r: r.command in AWAITED)
            now = time.perf_counter_ns()
            if record.command == "PublishError":
                codes = {pair(e, "publishing_id", "code")[1] for e in record.errors}
                raise ProbeError(
                    step,
                    "the broker refused the message: "
                    + ", ".join(describe_code(c) for c in sorted(codes)),
                )
            if record.command == "MetadataUpdate":
                raise ProbeError(step, f"the stream went away: {describe_code(record.code)}")
            if record.command == "PublishConfirm" and publishing_id in record.publishing_ids:
                confirmed = now
            elif record.command == "Deliver" and record.subscription_id == SUBSCRIPTION_ID:
                session.send("Credit", "credit", subscription_id=SUBSCRIPTION_ID, credit=1)
                if any(getattr(m, "data", None) == body for m in record.messages()):
                    delivered = now
        confirm_ms.append((confirmed - sent) / 1e6)
        delivery_ms.append((delivered - sent) / 1e6)
        result["confirmed"], result["delivered"] = len(confirm_ms), len(delivery_ms)
    result["confirm_ms"], result["delivery_ms"] = p50_max(confirm_ms), p50_max(delivery_ms)
    session.expect_ok("Unsubscribe", "unsubscribe", subscription_id=SUBSCRIPTION_ID)
    session.expect_ok("DeletePublisher", "delete_publisher", publisher_id=PUBLISHER_ID)


def _delete(connector: Connector, session: Session, name: str, patience: float = 0.0,
            status: Callable[[str], None] | None = None) -> Session:  # fmt: skip
    """Delete the stream on this session, else on a new one (an interrupted send may have
    left half a frame on the first), trying again for `patience` seconds while the broker
    cannot be reached or has the stream not available yet (a restart)."""
    deadline = time.monotonic() + patience
    failure = None
    for attempt in itertools.count():
        try:
            if attempt or session.closed:
                session.abort()
                session = connector.open()
            # Asked first: a broker just restarted answers a Delete of a stream it has not
            # recovered yet with STREAM_DOES_NOT_EXIST, its Metadata with NOT_AVAILABLE.
            code = _stream_code(session, name)
            if code == ResponseCode.OK:
                code = session.call("Delete", "delete", stream=name).record.code
            if code in (ResponseCode.OK, ResponseCode.STREAM_DOES_NOT_EXIST):  # (gone: fine)
                return session
            failure = describe_code(code)
            if code != ResponseCode.STREAM_NOT_AVAILABLE:
                break  # (the broker says no: waiting will not change it)
        except ProbeError as exc:
            failure = exc.message
        if attempt and time.monotonic() + RETRY_EVERY_S > deadline:
            break
        if attempt == 1 and status is not None:
            status(f"waiting up to {patience:.0f} s for the broker to delete the temporary "
                   f"stream {name} ({failure})")  # fmt: skip
        if attempt:
            time.sleep(RETRY_EVERY_S)
    raise ProbeError("delete", f"the temporary stream {name} could not be deleted ({failure}): "
                     "delete it by hand")  # fmt: skip


def _stream_code(session: Session, name: str) -> int:
    """What the broker's Metadata says of the stream (OK: it is there)."""
    metadata = session.call("Metadata", "metadata", streams=[name]).record.stream_metadata
    return next((m["code"] for m in metadata if m["stream"] == name),
                ResponseCode.STREAM_DOES_NOT_EXIST)  # fmt: skip

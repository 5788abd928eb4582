"""The report's sections, in order: each an anchor, a heading, what it shows and its figure.
The HTML report and the notebooks go through this one list."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamdissect.report import rocketmq
from streamdissect.report.consuming import consumer_figure, credit_figure
from streamdissect.report.latency import latency_figure
from streamdissect.report.publishing import backlog_figure, confirm_lag_figure
from streamdissect.report.timeline import timeline_figure
from streamdissect.report.traffic import errors_figure, throughput_figure


@dataclass(frozen=True)
class Section:
    anchor: str  # the HTML id the summary links to
    title: str
    about: str  # one paragraph: what the figure shows and how it is measured
    figure: Callable[..., Any]  # (data, tz=None) -> matplotlib Figure
    # whether the report shows it for these tables (None: always)
    shown: Callable[[Any], bool] | None = None


SECTIONS = (
    Section("connections", "Connections",
            "One bar per connection from its first to its last packet; the darker start is "
            "the handshake (PeerProperties to the Open response). The marker at the right end "
            "says who closed it; orange triangles are anomalies (gaps, retransmissions, "
            "malformed frames), red crosses error responses.", timeline_figure),
    Section("latency", "Request latency",
            "How long the broker took to answer each command (request to response of the same "
            "correlation id): the fraction answered within x ms, and the service response "
            "time table (open: never answered; orphans: responses to requests not captured).",
            latency_figure),
    Section("confirms", "Publish-confirm lag",
            "Time from the Publish carrying a publishing id to the PublishConfirm or "
            "PublishError naming it, by publish time, with its percentiles.",
            confirm_lag_figure),
    Section("backlog", "Confirm backlog",
            "Publishing ids sent and not yet confirmed, per publisher, after every frame.",
            backlog_figure),
    Section("credit", "Credit and stalls",
            "Credit counts chunks: Subscribe's initial credit, plus each Credit, minus one per "
            "Deliver. A stall (shaded) runs from the Deliver that used the last credit to the "
            "Credit that restored some: the broker may send nothing meanwhile.", credit_figure),
    Section("consumers", "Consumer lag and delivery latency",
            "Lag: how many offsets the delivered chunk is behind the committed chunk (Deliver "
            "v2). Delivery latency: capture time minus the chunk's timestamp (the broker's "
            "clock).", consumer_figure),
    Section("throughput", "Throughput",
            "Messages and bytes per second of capture time: published, confirmed, delivered.",
            throughput_figure),
    Section("errors", "Errors",
            "Every code other than OK: error responses by request, PublishError codes, Credit "
            "errors, MetadataUpdate.", errors_figure),
)  # fmt: skip

# The other protocols' sections, after the Stream's: each only where `shown` says (RocketMQ's
# for a capture, or dataset, with RocketMQ calls).
OTHER_SECTIONS = (
    Section("rocketmq-latency", "RocketMQ request latency",
            "How long each RocketMQ request took to be answered (request to the response of "
            "the same opaque on its connection), per request code: the fraction answered "
            "within x ms, and the service response time table per request code, server and "
            "direction (oneway requests expect no response; a long poll's time is how long "
            "the broker held it).", rocketmq.latency_figure, rocketmq.has_rocketmq),
    Section("rocketmq-errors", "RocketMQ errors",
            "Every response code other than SUCCESS, by the request it answered and its "
            "topic, with the server's remark in the table.", rocketmq.errors_figure,
            rocketmq.has_rocketmq),
    Section("rocketmq-traffic", "RocketMQ sends and pulls",
            "Each message sent (SEND_MESSAGE, SEND_MESSAGE_V2, a batch's messages) and each "
            "PULL_MESSAGE by request time, with the time to its response; failed sends and "
            "pulls that found nothing are marked.", rocketmq.traffic_figure,
            rocketmq.has_rocketmq),
    Section("rocketmq-offsets", "RocketMQ consumer offsets and lag",
            "The offset each consumer group last committed per queue (UPDATE_CONSUMER_OFFSET, "
            "or a pull carrying its commit) against the queue's max offset the broker last "
            "gave (pull responses, GET_MAX_OFFSET): the gap is the lag.",
            rocketmq.offsets_figure, rocketmq.has_rocketmq),
)  # fmt: skip

ANOMALIES = "anomalies"  # (the HTML report's last section: a table, no figure)


def section(anchor: str) -> Section:
    return next(s for s in SECTIONS if s.anchor == anchor)

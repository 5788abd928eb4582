"""What `streamdissect analyze` shows of RocketMQ's tables (a section only when the capture
gives it rows). Apart from tables.py, whose columns read spec.py: the text and JSON reports
ask every protocol for its sections, a Stream capture's too, which never reads RocketMQ's
tables (~1.5 ms of its start)."""

from __future__ import annotations

from streamdissect.protocols.base import ReportSection

REPORT_SECTIONS = (
    ReportSection("RocketMQ connections", "rocketmq_connections",
                  ("connection", "start_ns", "frames_c2s", "frames_s2c", "requests_c2s",
                   "requests_s2c", "oneway", "responses", "tcp_end", "status")),
    ReportSection("RocketMQ request latency (ms)", "rocketmq_latency"),
    ReportSection("RocketMQ errors", "rocketmq_errors",
                  ("request_name", "code", "code_name", "topic", "count", "remark")),
    ReportSection("RocketMQ sends", "rocketmq_sends",
                  ("connection", "request_ts_ns", "request_name", "topic", "queue_id",
                   "queue_offset", "msg_id", "size", "compressed", "latency_ms", "status"),
                  one_row_an_event=True),
    ReportSection("RocketMQ pulls", "rocketmq_pulls",
                  ("connection", "request_ts_ns", "consumer_group", "topic", "queue_id",
                   "queue_offset", "long_poll", "latency_ms", "held_ms", "code_name", "remark",
                   "messages", "next_begin_offset", "max_offset"),
                  one_row_an_event=True),
    ReportSection("RocketMQ consumer offsets and lag", "rocketmq_offsets",
                  ("server", "consumer_group", "topic", "queue_id", "committed_offset",
                   "commits", "queried_offset", "max_offset", "lag")),
    ReportSection("RocketMQ clients", "rocketmq_clients",
                  ("server", "client_id", "language", "version", "heartbeats",
                   "producer_groups", "consumer_groups", "subscriptions", "unregistered_ns")),
    ReportSection("RocketMQ broker registrations", "rocketmq_broker_registrations",
                  ("server", "request_ts_ns", "request_name", "cluster_name", "broker_name",
                   "broker_addr", "broker_id", "topics", "latency_ms", "code_name")),
)  # fmt: skip

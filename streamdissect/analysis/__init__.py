"""Analyses over a capture's frames: latency, confirms, credit, lag, lifecycle, errors."""

from streamdissect.analysis.driver import Analysis, analyze, analyze_events
from streamdissect.analysis.tables import (
    anomalies_table,
    backlog_table,
    confirms_table,
    connections_table,
    credit_balance_table,
    credit_table,
    deliveries_table,
    errors_table,
    frames_table,
    latency_table,
    publishes_table,
    requests_table,
    stalls_table,
    throughput_table,
)

__all__ = [
    "Analysis", "analyze", "analyze_events", "anomalies_table", "backlog_table",
    "confirms_table", "connections_table", "credit_balance_table", "credit_table", "deliveries_table", "errors_table",
    "frames_table", "latency_table", "publishes_table", "requests_table", "stalls_table",
    "throughput_table",
]

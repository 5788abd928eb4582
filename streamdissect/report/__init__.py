"""The report face: figures over the analysis tables, and one self-contained HTML file.

    from streamdissect import report
    data = report.load("capture.pcap")             # or report.from_parquet("out/")
    report.summary_frame(data)                     # what needs a look, as a DataFrame
    report.credit_figure(data)                     # a matplotlib Figure (any of FIGURES)
    report.rocketmq_latency_figure(data)           # RocketMQ's (report.OTHER_SECTIONS)
    report.write_html(data, "report.html")         # every section in one file

Every figure function takes the report's tables (`ReportData`: from a capture's analysis,
or from a directory `analyze --format parquet|csv -o DIR` or the Spark job wrote) and
returns a matplotlib Figure made without pyplot; time axes are the capture's wall-clock
time (UTC unless `tz`). Large tables are drawn binned, never point by point. This package
imports the core and the analysis, never another face.
"""

from __future__ import annotations

from streamdissect.report.canvas import zone
from streamdissect.report.consuming import consumer_figure, credit_figure
from streamdissect.report.data import ReportData, from_analysis, from_parquet, load
from streamdissect.report.html import render as render_html
from streamdissect.report.html import write as write_html
from streamdissect.report.latency import latency_figure
from streamdissect.report.publishing import backlog_figure, confirm_lag_figure
from streamdissect.report.rocketmq import errors_figure as rocketmq_errors_figure
from streamdissect.report.rocketmq import latency_figure as rocketmq_latency_figure
from streamdissect.report.rocketmq import offsets_figure as rocketmq_offsets_figure
from streamdissect.report.rocketmq import traffic_figure as rocketmq_traffic_figure
from streamdissect.report.sections import OTHER_SECTIONS, SECTIONS, Section
from streamdissect.report.summary import Finding, findings, summary_frame
from streamdissect.report.timeline import timeline_figure
from streamdissect.report.traffic import errors_figure, throughput_figure

# anchor -> figure function, in the report's order
FIGURES = {section.anchor: section.figure for section in SECTIONS}

__all__ = [
    "FIGURES", "OTHER_SECTIONS", "SECTIONS", "Finding", "ReportData", "Section", "backlog_figure",
    "confirm_lag_figure", "consumer_figure", "credit_figure", "errors_figure", "findings",
    "from_analysis", "from_parquet", "latency_figure", "load", "render_html",
    "rocketmq_errors_figure", "rocketmq_latency_figure", "rocketmq_offsets_figure",
    "rocketmq_traffic_figure",
    "summary_frame", "throughput_figure", "timeline_figure", "write_html", "zone",
]

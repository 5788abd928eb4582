"""What needs a look, read off the analysis tables: credit stalls, publishes never confirmed
or errored, error codes, requests never answered, capture anomalies, missed heartbeats,
broker-closed connections, chunks with a bad CRC, RocketMQ error codes and unanswered
RocketMQ requests; or that the capture has no Stream traffic
at all. Each finding names the report section that shows it."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from streamdissect.report import rocketmq
from streamdissect.report.text import duration, plural, wall

LEVELS = ("problem", "look", "note", "fine")  # most pressing first


@dataclass(frozen=True)
class Finding:
    level: str  # one of LEVELS
    topic: str
    text: str
    anchor: str  # the section that shows it


def findings(data: Any, tz: Any = None) -> list[Finding]:
    """The findings of a capture's tables, most pressing first."""
    if not data.has_traffic:
        return [_no_traffic(data)]
    found = [*_stalls(data, tz), *_publishes(data), *_error_codes(data), *_open_requests(data),
             *_anomalies(data), *_heartbeats(data), *_closes(data), *_crc(data),
             *(Finding(*f) for f in rocketmq.findings(data))]  # fmt: skip
    if not found:
        found.append(Finding("fine", "Nothing stands out",
                             "No credit stalls, no unconfirmed or errored publishes, no error "
                             "codes, no anomalies, no missed heartbeats.", "connections"))  # fmt: skip
    if data.missing:
        found.append(Finding("note", "Tables not in this dataset",
                             f"{', '.join(data.missing)}: the figures that need them say so.",
                             "connections"))  # fmt: skip
    return sorted(found, key=lambda f: LEVELS.index(f.level))


def summary_frame(data: Any, tz: Any = None) -> Any:
    """The findings as a DataFrame (level, topic, text, section), for a notebook."""
    import pandas as pd

    return pd.DataFrame([(f.level, f.topic, f.text, f.anchor) for f in findings(data, tz)],
                        columns=["level", "topic", "finding", "section"])  # fmt: skip


def _no_traffic(data: Any) -> Finding:
    anomalies = data.table("anomalies")
    if len(anomalies) or data.frames:
        kinds = _counted(anomalies["kind"].dropna())
        return Finding("problem", "No readable Stream traffic",
                       f"Only damaged Stream data: {plural(data.frames, 'frame')} seen, none "
                       f"readable (anomalies: {kinds or 'none'}). What the sections below show "
                       "comes from those damaged frames.", "anomalies")  # fmt: skip
    return Finding("problem", "No Stream traffic",
                   "No RabbitMQ Stream traffic in this capture: no connection on the Stream "
                   "ports, and none recognised by its first bytes. Every section below is "
                   "empty.", "connections")  # fmt: skip


def _stalls(data: Any, tz: Any) -> list[Finding]:
    stalls = data.table("stalls")
    out = []
    if len(stalls):
        subs = stalls[["connection", "subscription_id"]].drop_duplicates()
        longest = stalls.loc[stalls["duration_ms"].fillna(-1).idxmax()]
        had_more = int(stalls["broker_had_more"].fillna(False).sum())
        text = (f"{plural(len(stalls), 'credit stall')} on {plural(len(subs), 'subscription')}, "
                f"{duration(stalls['duration_ms'].fillna(0).sum())} in all (longest "
                f"{duration(longest['duration_ms'])} from {wall(longest['start_ns'], tz)}).")
        if had_more:
            text += (f" The broker had more to send in {had_more} of them: the consumer's "
                     "credit, not the broker, held delivery back.")
        out.append(Finding("look", "Credit stalls", text, "credit"))
    credit_errors = int(data.table("credit")["credit_errors"].fillna(0).sum())
    if credit_errors:
        out.append(Finding("problem", "Credit errors",
                           f"{plural(credit_errors, 'Credit')} refused by the broker (0x8009: "
                           "credit for a subscription it does not know).", "errors"))  # fmt: skip
    return out


def _publishes(data: Any) -> list[Finding]:
    confirms = data.table("confirms")
    unconfirmed = int(confirms["unconfirmed"].fillna(0).sum())
    errored = int(confirms["errored"].fillna(0).sum())
    if not len(confirms) and data.count("publishes"):  # (only the per-id table)
        unconfirmed = errored = 0
        for part in data.batches("publishes", ("outcome",)):
            unconfirmed += _equal(part["outcome"], "unconfirmed")
            errored += _equal(part["outcome"], "errored")
    out = []
    if errored:
        codes: Counter = Counter()
        for cell in confirms["errors_by_code"].dropna():
            codes.update(json.loads(cell))
        detail = f": {_counted_items(codes)}" if codes else ""
        out.append(Finding("problem", "Errored publishes",
                           f"{plural(errored, 'publishing id')} answered by PublishError{detail}.",
                           "confirms"))  # fmt: skip
    if unconfirmed:
        publishers, _ = _counting(data, "confirms", "unconfirmed")
        out.append(Finding("problem", "Unconfirmed publishes",
                           f"{plural(unconfirmed, 'publishing id')} never confirmed within the "
                           f"capture ({plural(max(len(publishers), 1), 'publisher')}).",
                           "confirms"))  # fmt: skip
    return out


def _error_codes(data: Any) -> list[Finding]:
    errors = data.table("errors")
    if not len(errors):
        return []
    total = int(errors["count"].fillna(0).sum())
    top = errors.sort_values("count", ascending=False).head(6)
    parts = [f"{row.code_name or row.code} ({row.command}) ×{int(row['count'])}"
             for _, row in top.iterrows()]  # fmt: skip
    more = f", and {len(errors) - len(top)} more" if len(errors) > len(top) else ""
    return [Finding("problem", "Error codes",
                    f"{plural(total, 'code')} other than OK: "
                    f"{', '.join(parts)}{more}.", "errors")]  # fmt: skip


def _open_requests(data: Any) -> list[Finding]:
    open_, total = _counting(data, "latency", "open_requests")
    parts = ", ".join(f"{row.command} ×{int(row.open_requests)}" for row in open_.itertuples())
    text = f"{plural(total, 'request')} with no response in the capture: {parts}."
    return [Finding("look", "Requests never answered", text, "latency")] if total else []


def _anomalies(data: Any) -> list[Finding]:
    anomalies = data.table("anomalies")
    if not len(anomalies):
        return []
    return [Finding("look", "Capture anomalies",
                    f"{plural(len(anomalies), 'anomaly', 'anomalies')} in the capture: "
                    f"{_counted(anomalies['kind'].dropna())}.", "anomalies")]  # fmt: skip


def _heartbeats(data: Any) -> list[Finding]:
    missed, total = _counting(data, "connections", "missed_heartbeat_gaps")
    text = (f"{plural(total, 'silence')} longer than two heartbeat intervals on "
            f"{plural(len(missed), 'connection')}.")
    return [Finding("problem", "Missed heartbeats", text, "connections")] if total else []


def _closes(data: Any) -> list[Finding]:
    connections = data.table("connections")
    by_server = connections[connections["closed_by"] == "server"]
    if not len(by_server):
        return []
    reasons = _counted(by_server["close_reason"].fillna("no reason given"))
    return [Finding("look", "Closed by the broker",
                    f"{plural(len(by_server), 'connection')} closed by the broker ({reasons}).",
                    "connections")]  # fmt: skip


def _crc(data: Any) -> list[Finding]:
    bad = sum(_equal(part["crc_ok"], False) for part in data.batches("deliveries", ("crc_ok",)))
    if not bad:
        return []
    return [Finding("problem", "Chunk CRC failures",
                    f"{plural(bad, 'delivered chunk')} whose data does not match its CRC.",
                    "consumers")]  # fmt: skip


def _equal(column: Any, value: Any) -> int:
    """How many of an Arrow column's values are `value` (missing ones are not)."""
    import pyarrow.compute as pc

    return int(pc.sum(pc.equal(column, value)).as_py() or 0)


def _counting(data: Any, table: str, column: str) -> tuple[Any, int]:
    """(the rows of `table` whose `column` is above 0, the column's sum over them)."""
    rows = data.table(table)
    rows = rows[rows[column].fillna(0) > 0]
    return rows, int(rows[column].sum())


def _counted(values: Any) -> str:
    return _counted_items(Counter(values))


def _counted_items(counts: Counter) -> str:
    return ", ".join(f"{name} ×{n}" for name, n in counts.most_common(8))

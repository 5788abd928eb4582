"""One call from a capture path to each tidy pandas table."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .fields import get
from .frame_tables import dataframe
from .run import analyze

if TYPE_CHECKING:
    import pandas as pd

# Columns of the frames table taken from the record itself; the rest go to `fields` (JSON).
_ENVELOPE = ("key", "command", "response", "version", "size", "correlation_id", "code",
             "code_name", "truncated")
_PROMOTED = ("publisher_id", "subscription_id", "stream", "record_count", "credit")


def frame_row(ev, show_secrets: bool = False) -> dict:
    rec = ev.record
    d = rec.to_dict(show_secrets=show_secrets)
    row = {"ts_ns": ev.ts_ns, "connection": ev.connection, "direction": ev.direction,
           "stream_offset": get(ev, "stream_offset")}
    for name in _ENVELOPE + _PROMOTED:
        row[name] = d.pop(name, None)
    credit = row["credit"]
    if not isinstance(credit, (int, type(None))):
        row["credit"] = None
    rest = {k: v for k, v in d.items() if k not in row}
    row["fields"] = json.dumps(rest, default=str) if rest else None
    return row


def frames_table(paths: str | Sequence[str], ports: Sequence[int] = (5552,),
                 heuristic: bool = True, show_secrets: bool = False) -> pd.DataFrame:
    from ..dissect import Dissector

    if isinstance(paths, str):
        paths = [paths]
    dissector = Dissector(ports=ports, heuristic=heuristic)
    rows = [frame_row(ev, show_secrets) for ev in dissector.run(paths)
            if getattr(ev, "record", None) is not None]
    return dataframe("frames", rows)


def _table(name: str):
    def table(paths, **kwargs) -> pd.DataFrame:
        return getattr(analyze(paths, **kwargs), name)

    table.__name__ = f"{name}_table"
    table.__doc__ = f"The {name} table of a capture (see streamdissect.schema)."
    return table


connections_table = _table("connections")
requests_table = _table("requests")
latency_table = _table("latency")
publishes_table = _table("publishes")
confirms_table = _table("confirms")
backlog_table = _table("backlog")
credit_table = _table("credit")
stalls_table = _table("stalls")
deliveries_table = _table("deliveries")
throughput_table = _table("throughput")
errors_table = _table("errors")
anomalies_table = _table("anomalies")

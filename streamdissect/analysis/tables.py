"""One call from a capture path to each tidy pandas table."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from streamdissect.analysis.driver import analyze
from streamdissect.analysis.fields import get
from streamdissect.protocols.stream.records import COMMON_COLUMNS, Record
from streamdissect.tables import schema
from streamdissect.tables.batches import CHUNK_COLUMNS, LEFT_OUT
from streamdissect.tables.convert import arrow_dataframe

if TYPE_CHECKING:
    import pandas as pd

# The reference row of the frames table, one dict per record (the tests hold
# frame_batches' columns equal to it; which columns there are is frame_batches' own
# definition); frames_table itself is built from Arrow batches.


def frame_row(ev, show_secrets: bool = False) -> dict:
    rec = ev.record
    d = rec.to_dict(show_secrets=show_secrets)
    row = {"ts_ns": ev.ts_ns, "connection": ev.connection, "direction": ev.direction,
           "stream_offset": get(ev, "stream_offset")}
    for name in COMMON_COLUMNS:
        row[name] = d.pop(name, None)
    typed = [c.name for c in schema.FRAMES if c.name not in row and c.name != "fields"]
    known = isinstance(rec, Record)  # (a Malformed frame's `offset` is where it broke)
    taken = set(COMMON_COLUMNS)
    for name in typed:
        present = known and (name in d or name == "crc_ok")
        row[name] = getattr(rec, name, None) if present else None
        if present:
            taken.add(name)
    chunk = getattr(rec, "chunk", None)
    for column, header in CHUNK_COLUMNS.items():
        row[column] = chunk[header] if chunk else None
    if isinstance(row["publishing_ids"], range):
        row["publishing_ids"] = list(row["publishing_ids"])
    left_out = LEFT_OUT if known else ()
    rest = {k: v for k, v in d.items() if k not in taken and k not in left_out}
    row["fields"] = json.dumps(rest, default=str) if rest else None
    return {c.name: schema.fit(c.kind, row[c.name]) for c in schema.FRAMES}


def frames_table(paths: str | Sequence[str], ports: Sequence[int] = (5552,),
                 heuristic: bool = True, show_secrets: bool = False) -> pd.DataFrame:
    """One row per frame (streamdissect.tables.schema.FRAMES), made from Arrow batches."""
    from streamdissect.tables.batches import frame_batches

    batches = frame_batches(paths, ports=ports, heuristic=heuristic, show_secrets=show_secrets)
    return arrow_dataframe("frames", batches)


def _table(name: str):
    def table(paths, **kwargs) -> pd.DataFrame:
        return getattr(analyze(paths, **kwargs), name)

    table.__name__ = f"{name}_table"
    table.__doc__ = f"The {name} table of a capture (see streamdissect.tables.schema)."
    return table


connections_table = _table("connections")
requests_table = _table("requests")
latency_table = _table("latency")
publishes_table = _table("publishes")
confirms_table = _table("confirms")
backlog_table = _table("backlog")
credit_table = _table("credit")
stalls_table = _table("stalls")
credit_balance_table = _table("credit_balance")
deliveries_table = _table("deliveries")
throughput_table = _table("throughput")
errors_table = _table("errors")
anomalies_table = _table("anomalies")

"""One call from a capture path to each tidy pandas table."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from streamdissect.analysis.driver import analyze
from streamdissect.protocols import registry
from streamdissect.tables.convert import arrow_dataframe

if TYPE_CHECKING:
    import pandas as pd


def frames_table(paths: str | Sequence[str],
                 ports: Iterable[int] | Mapping[str, Iterable[int]] | None = None,
                 heuristic: bool = True, show_secrets: bool = False,
                 protocol: str | None = None) -> pd.DataFrame:  # fmt: skip
    """One row per frame of `protocol` (default: the Stream, streamdissect.tables.schema.FRAMES),
    made from Arrow batches (tables.batches.frame_batches)."""
    from streamdissect.tables.batches import frame_batches

    batches = frame_batches(paths, ports=ports, heuristic=heuristic, show_secrets=show_secrets,
                            protocol=protocol)  # fmt: skip
    return arrow_dataframe(registry.protocol(protocol).frames_table, batches)


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


def messages_table(paths: str | Sequence[str], max_body: int | None = 256, bodies: bool = True,
                   **kwargs) -> pd.DataFrame:  # fmt: skip
    """One row a message, of every protocol that carries them (the Stream's Publish and
    Deliver, RocketMQ's sends and pulled messages; streamdissect.tables.schema.MESSAGES):
    where it was, who sent it, its properties, its body's size and first `max_body` bytes
    (none without `bodies`)."""
    return analyze(paths, messages=True, max_body=max_body, bodies=bodies, **kwargs).messages

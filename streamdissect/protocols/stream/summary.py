"""One line per frame: the command and the fields a reader scans for (tshark's Info column).

Shared by every face that shows frames one per line: `streamdissect frames` and the scapy
layer's `summary()`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# The fields a reader scans for, in the order a line shows them (the Wireshark plugin's Info
# column shows the same).
SUMMARY_FIELDS = (
    "publisher_id",
    "subscription_id",
    "stream",
    "credit",
    "record_count",
    "committed_chunk_id",
    "mechanism",
    "username",
    "frame_max",
    "heartbeat",
    "closing_code",
    "closing_reason",
    "reason",
)


# A frame's publishing ids: every one up to MOST_IDS_LISTED of them, else the first, the last
# and how many (the frames text writes its hot runs' ids with these formats too).
MOST_IDS_LISTED = 3
IDS_LISTED = "ids={}"
IDS_SPAN = "ids={}..{}({})"


def frame_summary(record: Any, show_secrets: bool = False) -> str:
    """Command and the fields a reader scans for, like tshark's Info column."""
    fields = record.to_dict(show_secrets=show_secrets)
    return fields_summary(fields, fields.get("command") or type(record).__name__)


def fields_summary(fields: dict[str, Any], name: str,
                   ids_text: Callable[[Any], str] | None = None,
                   summary_fields: tuple[str, ...] = SUMMARY_FIELDS) -> str:  # fmt: skip
    """The summary of a frame's dict (its to_dict) of command `name`; `ids_text`: how its
    publishing ids are written (default ids_summary); `summary_fields`: SUMMARY_FIELDS, or
    those of them the dict has (a record class's dicts have the same keys)."""
    parts = [f"{name}{'Response' if fields.get('response') else ''} v{fields.get('version')}"]
    if name in ("Unknown", "Malformed") and fields.get("key") is not None:
        parts.append(f"key=0x{fields['key']:04x}")
    if fields.get("correlation_id") is not None:
        parts.append(f"corr={fields['correlation_id']}")
    if fields.get("code") is not None:
        parts.append(f"code={fields.get('code_name')}")
    for field in summary_fields:
        value = fields.get(field)
        if value is not None and value != "":
            parts.append(f"{field}={value}")
    ids = fields.get("publishing_ids")
    if ids:
        parts.append((ids_text or ids_summary)(ids))
    if fields.get("errors"):
        parts.append(f"errors={len(fields['errors'])}")
    chunk = fields.get("chunk")
    if chunk and chunk["chunk_id"] is not None:  # (None: a cut frame's header stops before)
        parts.append(f"chunk_id={chunk['chunk_id']}")
    cut = fields.get("cut")
    if cut and cut.get("count") is not None:  # the count a cut list's header says
        parts.append(f"{cut['field']}_count={cut['count']}")
    parts.append(f"size={fields.get('size')}")
    if fields.get("truncated"):
        parts.append("[truncated]" if not cut else f"[truncated] cut_at={cut['at']}")
    return " ".join(parts)


def ids_summary(ids: list[int]) -> str:
    if len(ids) > MOST_IDS_LISTED:
        return IDS_SPAN.format(ids[0], ids[-1], len(ids))
    return IDS_LISTED.format(ids)

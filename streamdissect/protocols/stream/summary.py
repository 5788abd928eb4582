"""One line per frame: the command and the fields a reader scans for (tshark's Info column).

Shared by every face that shows frames one per line: `streamdissect frames` and the scapy
layer's `summary()`.
"""

from __future__ import annotations

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


def frame_summary(record: Any, show_secrets: bool = False) -> str:
    """Command and the fields a reader scans for, like tshark's Info column."""
    fields = record.to_dict(show_secrets=show_secrets)
    name = fields.get("command") or type(record).__name__
    parts = [f"{name}{'Response' if fields.get('response') else ''} v{fields.get('version')}"]
    if name in ("Unknown", "Malformed") and fields.get("key") is not None:
        parts.append(f"key=0x{fields['key']:04x}")
    if fields.get("correlation_id") is not None:
        parts.append(f"corr={fields['correlation_id']}")
    if fields.get("code") is not None:
        parts.append(f"code={fields.get('code_name')}")
    for name in SUMMARY_FIELDS:
        value = fields.get(name)
        if value is not None and value != "":
            parts.append(f"{name}={value}")
    ids = fields.get("publishing_ids")
    if ids:
        parts.append(f"ids={ids[0]}..{ids[-1]}({len(ids)})" if len(ids) > 3 else f"ids={ids}")
    if fields.get("errors"):
        parts.append(f"errors={len(fields['errors'])}")
    chunk = fields.get("chunk")
    if chunk:
        parts.append(f"chunk_id={chunk['chunk_id']}")
    parts.append(f"size={fields.get('size')}")
    if fields.get("truncated"):
        parts.append("[truncated]")
    return " ".join(parts)

"""What the capture layer tells its callers about bad input."""

from __future__ import annotations

from collections.abc import Callable


class CaptureError(Exception):
    """The input cannot be read as a capture at all (not pcap/pcapng, unreadable, empty)."""


# Called for damage that is survivable: (kind, ts_ns or None, file offset, detail).
# A callback instead of yielded objects keeps the per-packet loop free of type checks.
AnomalyReport = Callable[[str, "int | None", int, str], None]


def ignore_anomaly(kind: str, ts_ns: int | None, offset: int, detail: str) -> None:
    """Default report: drop it (callers that care pass their own)."""


class PacketProblem(Exception):
    """A packet whose headers are hostile or unusable; raised by the decoders, rare."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail

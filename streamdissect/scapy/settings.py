"""The layer's settings (like scapy's own `conf`): change them on `streamdissect.scapy.conf`."""

from __future__ import annotations

from dataclasses import dataclass

from streamdissect.framing.framer import DEFAULT_MAX_FRAME


@dataclass
class LayerSettings:
    show_secrets: bool = False  # SASL PLAIN passwords shown by show() / summary() / repr
    max_frame: int = DEFAULT_MAX_FRAME  # a size field above it is garbage, never buffered


conf = LayerSettings()
# The TCP ports the layer is bound to (bind.bind_port), which reassembly takes as servers'.
BOUND_PORTS: set[int] = set()

"""The Wireshark face: a Lua dissector generated from the protocol table (generate.py,
runtime.lua), and tshark run with it (tshark.py)."""

from streamdissect.wireshark.generate import generate
from streamdissect.wireshark.naming import GenerationError

__all__ = ["GenerationError", "generate"]

"""The Wireshark face: a Lua dissector generated from the protocol table (generate.py,
runtime.lua), and tshark run with it (tshark.py)."""

from .generate import generate
from .naming import GenerationError

__all__ = ["GenerationError", "generate"]

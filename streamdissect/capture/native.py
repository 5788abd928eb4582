"""The compiled record walks (_records.c: pcap records, pcapng runs of Enhanced Packet Blocks),
when built and wanted.

`pip install` builds the optional C extensions when a C compiler and the Python headers are
there (setup.py); without them the pure-Python code runs, which is also the reference they
are tested against (tests run both). The environment variable STREAMDISSECT_NATIVE says
which, for every compiled part: "0" the pure-Python code, "1" the compiled code or an
ImportError, unset (or anything else) the compiled code when built.

`loaded`: the extension module, or None (blocks.walk_records reads it at each call, so
tests can set it to None).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

ENV = "STREAMDISSECT_NATIVE"


def optional(name: str, stale: str | None = None) -> ModuleType | None:
    """The extension module `name` as ENV wants it: None for "0", the module or an
    ImportError for "1", else the module when it was built. `stale`: why the compiled code
    no longer matches the Python tables it was written from (then it is not used: an
    ImportError saying so for "1", else None)."""
    wanted = os.environ.get(ENV, "")
    if wanted == "0":
        return None
    if stale is not None:
        if wanted == "1":
            raise ImportError(stale)
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        if wanted == "1":
            raise
        return None


loaded = optional("streamdissect.capture._records")

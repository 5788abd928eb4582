"""Both walks of the Stream fast path and of the pcap records: the compiled loops
(protocols/stream/_native.c, capture/_records.c) and the pure-Python code they replace (the
reference). A test module that holds the bulk engine equal to the per-packet path runs each
test in both modes:

    pytestmark = pytest.mark.usefixtures("walk_mode")   # with `from native_modes import walk_mode`

Without the extension built, only "python" runs (test_native.py says whether it should have
been built)."""

from __future__ import annotations

import pytest

from streamdissect.capture import native as capture_native
from streamdissect.protocols.stream import native

MODES = (["native", "python"] if native.loaded is not None or capture_native.loaded is not None
         else ["python"])  # fmt: skip


@pytest.fixture(params=MODES)
def walk_mode(request, monkeypatch):
    """The mode's walk: "python" sets both native.loaded to None (this process and the
    helper it forks) and STREAMDISSECT_NATIVE=0 (the processes a test starts)."""
    if request.param == "python":
        monkeypatch.setattr(native, "loaded", None)
        monkeypatch.setattr(capture_native, "loaded", None)
        monkeypatch.setenv(native.ENV, "0")
    return request.param

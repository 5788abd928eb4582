"""Both walks of the Stream fast path and of the pcap records, RocketMQ's hot frames read
by the compiled reader or the Python path, and both writers of the JSON report's rows (texts,
numbers): the compiled code (protocols/stream/_native.c, protocols/rocketmq/_native.c,
capture/_records.c, cli/_json_rows.c) and the pure-Python code it replaces (the reference).
A test module that holds the bulk engine equal to the per-packet path runs each test in both
modes:

    pytestmark = pytest.mark.usefixtures("walk_mode")   # (conftest.py loads this plugin)

Without the extension built, only "python" runs (test_native.py says whether it should have
been built)."""

from __future__ import annotations

import pytest

from streamdissect.capture import native as capture_native
from streamdissect.cli import _text_report
from streamdissect.protocols.rocketmq import native as rocketmq_native
from streamdissect.protocols.stream import native

BUILT = (native.loaded, rocketmq_native.loaded, capture_native.loaded,
         _text_report.compiled_rows)  # fmt: skip
MODES = ["native", "python"] if any(m is not None for m in BUILT) else ["python"]


@pytest.fixture(params=MODES)
def walk_mode(request, monkeypatch):
    """The mode's walk: "python" sets the compiled modules to None (this process and the
    helper it forks) and STREAMDISSECT_NATIVE=0 (the processes a test starts)."""
    if request.param == "python":
        monkeypatch.setattr(native, "loaded", None)
        monkeypatch.setattr(rocketmq_native, "loaded", None)
        monkeypatch.setattr(capture_native, "loaded", None)
        monkeypatch.setattr(_text_report, "compiled_rows", None)
        monkeypatch.setenv(capture_native.ENV, "0")
    return request.param

"""Both walks of the Stream fast path: the compiled loops (protocols/stream/_native.c) and
the pure-Python code they replace (the reference); and RocketMQ's hot frames read by the
compiled reader (protocols/rocketmq/_native.c) or the Python path. A test module that holds the bulk engine
equal to the per-packet path runs each test in both modes:

    pytestmark = pytest.mark.usefixtures("walk_mode")   # (conftest.py loads this plugin)

Without the extension built, only "python" runs (test_native.py says whether it should have
been built)."""

from __future__ import annotations

import pytest

from streamdissect.protocols.rocketmq import native as rocketmq_native
from streamdissect.protocols.stream import native

MODES = (["native", "python"] if native.loaded is not None or rocketmq_native.loaded is not None
         else ["python"])  # fmt: skip


@pytest.fixture(params=MODES)
def walk_mode(request, monkeypatch):
    """The mode's walk: "python" sets native.loaded to None (this process) and
    STREAMDISSECT_NATIVE=0 (the processes a test starts)."""
    if request.param == "python":
        monkeypatch.setattr(native, "loaded", None)
        monkeypatch.setattr(rocketmq_native, "loaded", None)
        monkeypatch.setenv(native.ENV, "0")
    return request.param

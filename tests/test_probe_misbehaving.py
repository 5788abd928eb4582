"""The probe against a broker of our own that misbehaves (streamdissect.probe.testing): it
closes mid-handshake, answers slowly, sends garbage, an oversized frame or an HTTP answer, or
never answers, at each step of the handshake. The probe names the failing step within its
timeout, exits non-zero and prints no traceback; a hostile length field costs no memory."""

from __future__ import annotations

import time
import tracemalloc

import pytest
from probe_support import no_traceback, run, uri

from streamdissect.cli import main
from streamdissect.probe.testing import MODES, STEPS, MisbehavingBroker

TIMEOUT = 1.0
STEP_NAMES = {"PeerProperties": "peer_properties", "SaslHandshake": "sasl_handshake",
              "SaslAuthenticate": "sasl_authenticate", "Tune": "tune", "Open": "open"}  # fmt: skip
SAYS = {
    "close": "closed the connection",
    "slow": f"no answer within {TIMEOUT:g} s",
    "silent": f"no answer within {TIMEOUT:g} s",
    "garbage": "a frame that is not the Stream protocol (key 0x7f7f",
    "oversized": "a frame of 2147483647 bytes, above the frame limit of 1048576 bytes",
    "http": "a frame of 1213486160 bytes",  # ("HTTP" read as a size)
}


@pytest.mark.parametrize("at", STEPS)
@pytest.mark.parametrize("mode", MODES)
def test_the_failing_step_is_named_within_the_timeout(mode, at, capsys):
    with MisbehavingBroker(mode, at=at, delay=3 * TIMEOUT) as broker:
        started = time.monotonic()
        code = main(["probe", uri(broker.port), "--timeout", str(TIMEOUT)])
        took = time.monotonic() - started
        assert broker.connections == 1
    err = capsys.readouterr().err
    assert code == 3
    assert f"error: {STEP_NAMES[at]}: " in err and SAYS[mode] in err, err
    assert took < 3 * TIMEOUT  # (before the broker's delayed answer: the timeout ended it;
    # a wider margin than TIMEOUT + 1 s, which a loaded machine's scheduling could pass)


@pytest.mark.parametrize("mode", MODES)
def test_as_a_process_no_traceback(mode):
    with MisbehavingBroker(mode, at="Open", delay=3 * TIMEOUT) as broker:
        result = run("probe", uri(broker.port), "--timeout", str(TIMEOUT), timeout=30)
    assert result.returncode == 3
    assert "error: open: " in result.stderr and SAYS[mode] in result.stderr
    assert result.stdout == ""
    no_traceback(result)


def test_a_slow_answer_within_the_timeout_passes_the_step(capsys):
    """Slow but in time: the handshake completes; this broker then ignores what follows."""
    with MisbehavingBroker("slow", at="Open", delay=0.3) as broker:
        code = main(["probe", uri(broker.port), "--timeout", "1"])
    err = capsys.readouterr().err
    assert code == 3
    assert "error: exchange_command_versions: no answer within 1 s" in err


def test_an_oversized_frame_costs_no_memory(capsys):
    with MisbehavingBroker("oversized", at="PeerProperties") as broker:
        tracemalloc.start()
        try:
            main(["probe", uri(broker.port), "--timeout", "1"])
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert "2147483647 bytes" in capsys.readouterr().err
    assert peak < 4 * 1024 * 1024


def test_the_frame_limit_is_the_users_before_tune(capsys):
    """--frame-max lower than a real answer: the answer is refused at its size field."""
    with MisbehavingBroker("slow", at="Open", delay=0.1) as broker:
        code = main(["probe", uri(broker.port), "--timeout", "1", "--frame-max", "40"])
    assert code == 3
    assert "peer_properties: the broker sent a frame of" in capsys.readouterr().err

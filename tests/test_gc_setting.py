"""The library's bulk calls (analyze, analyze_events, frame_batches) run the cyclic garbage
collector at the command line's pace while they work, and leave the caller's setting (its
thresholds, enabled or not) as they found it: after they return, after they raise, and
between the batches a caller is handed. Seen from inside the run: Dissector.run, wrapped,
notes the thresholds at each event it gives."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest
import worsen

from streamdissect.analysis import analyze, analyze_events
from streamdissect.capture import CaptureError
from streamdissect.engine import dissect
from streamdissect.engine.gc_setting import bulk_gc
from streamdissect.tables.batches import frame_batches

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = worsen.CAPTURES / "rstream-publish-confirm-3.10.pcap"
ROCKETMQ = worsen.CAPTURES / "rocketmq" / "rmq-broker-register.pcap"
CALLERS = (500, 7, 3)  # a caller's own thresholds, unlike Python's default and the CLI's


@pytest.fixture
def caller_gc():
    """The test as a caller with its own thresholds; the process's setting put back after."""
    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    gc.set_threshold(*CALLERS)
    yield
    gc.set_threshold(*thresholds)
    (gc.enable if enabled else gc.disable)()


@pytest.fixture
def seen_in_run(monkeypatch) -> list:
    """The thresholds at each event the dissector gives, as the run goes."""
    seen: list = []
    run = dissect.Dissector.run

    def noting(self, *args, **kwargs):
        for event in run(self, *args, **kwargs):
            seen.append(gc.get_threshold())
            yield event

    monkeypatch.setattr(dissect.Dissector, "run", noting)
    return seen


def command_line_thresholds() -> tuple[int, ...]:
    """The thresholds the `streamdissect` command runs its subcommand with, seen from its
    main() in a process of its own."""
    script = ("import gc, sys, streamdissect.cli as cli\n"
              "def main(argv=None):\n"
              "    print(list(gc.get_threshold()))\n"
              "    return 0\n"
              "cli.main = main\n"
              "cli.command()\n")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    return tuple(json.loads(out.stdout))


def test_analyze_runs_at_the_command_lines_pace(caller_gc, seen_in_run):
    analysis = analyze(str(CAPTURE))
    assert len(analysis.connections) > 0
    assert seen_in_run, "the run gave no events"
    cli = command_line_thresholds()
    assert cli != CALLERS
    assert set(seen_in_run) == {cli}
    assert gc.get_threshold() == CALLERS


@pytest.mark.parametrize("enabled", [True, False])
def test_caller_setting_back_after_analyze_returns(caller_gc, seen_in_run, enabled):
    (gc.enable if enabled else gc.disable)()
    analyze(str(ROCKETMQ))
    assert seen_in_run and CALLERS not in seen_in_run
    assert gc.get_threshold() == CALLERS
    assert gc.isenabled() is enabled


@pytest.mark.parametrize("enabled", [True, False])
def test_caller_setting_back_after_analyze_raises(caller_gc, tmp_path, enabled):
    junk = tmp_path / "not-a-capture.pcap"
    junk.write_bytes(b"this is no capture at all, only words" * 4)
    (gc.enable if enabled else gc.disable)()
    with pytest.raises(CaptureError):
        analyze(str(junk))
    assert gc.get_threshold() == CALLERS
    assert gc.isenabled() is enabled
    with pytest.raises(CaptureError):
        list(frame_batches(str(junk)))
    assert gc.get_threshold() == CALLERS
    assert gc.isenabled() is enabled


def test_analyze_events_at_the_pace_and_back(caller_gc):
    seen = []

    def events():
        for event in dissect.Dissector().run([str(CAPTURE)]):
            seen.append(gc.get_threshold())
            yield event

    analyze_events(events())
    assert seen and set(seen) == {command_line_thresholds()}
    assert gc.get_threshold() == CALLERS


def test_frame_batches_at_the_pace_the_caller_at_its_own(caller_gc, seen_in_run):
    between = []
    batches = 0
    for batch in frame_batches(str(CAPTURE), rows_per_batch=10):
        between.append(gc.get_threshold())
        batches += batch.num_rows > 0
    assert batches > 1  # (several batches: the caller's code ran between them)
    assert set(between) == {CALLERS}
    assert seen_in_run and set(seen_in_run) == {command_line_thresholds()}
    assert gc.get_threshold() == CALLERS


def test_frame_batches_left_early_puts_the_setting_back(caller_gc):
    batches = frame_batches(str(CAPTURE), rows_per_batch=10)
    next(batches)
    assert gc.get_threshold() == CALLERS
    batches.close()
    assert gc.get_threshold() == CALLERS


def test_overlapping_runs_put_back_the_first_callers_setting(caller_gc):
    """Runs that overlap (threads, a call inside another): the thresholds found before the
    first come back when the last ends, whichever order they end in."""
    first, second = bulk_gc(), bulk_gc()
    first.__enter__()
    during = gc.get_threshold()
    assert during != CALLERS
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.get_threshold() == during  # (the second is still under way)
    second.__exit__(None, None, None)
    assert gc.get_threshold() == CALLERS


def test_a_setting_changed_during_the_run_is_left_as_it_is(caller_gc):
    with bulk_gc():
        gc.set_threshold(2_000, 5, 5)  # (the caller's other thread, say)
    assert gc.get_threshold() == (2_000, 5, 5)

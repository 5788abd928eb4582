"""`frames` text, `-c N` and `-Y EXPR` from the bulk engine's hot runs (HotFrames columns: no
record, no dict) print the bytes the reference path prints from records: the streaming
engine's events through the same writers, on every shipped capture and made-worse copies."""

from __future__ import annotations

import io
import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import worsen
from test_frames_cli import _odd_hot_capture

from streamdissect.cli import main
from streamdissect.cli._display_filter import MISSING, compile_filter
from streamdissect.cli._filter_columns import Category, Constant, IntLists
from streamdissect.cli._hot_fields import BODIES, CHUNK_COLUMN, column, run_mask
from streamdissect.cli._jsonl_columns import run_lines
from streamdissect.cli.frames import filter_fields, jsonl_writer, selecting, text_writer
from streamdissect.engine.dissect import Dissector, FrameEvent
from streamdissect.protocols.stream.hot import HotFrames
from streamdissect.protocols.stream.spec import message_spec

# Over hot fields (and their edges: nulls, huge and negative ints, floats, lists, the chunk),
# the fields every frame has, and fields no hot frame has.
HOT_FILTERS = (
    'command == "Deliver"', "credit > 0", "credit == -5", "credit >= 1.5", "credit < 1.0",
    "credit < 1.5", "credit <= 1.5", "credit > 0.5", "credit == 1.5", "credit != 1.5",
    "size < 7.5", "size == 7.0",
    'subscription_id == 0 and command == "Credit"', "publishing_ids contains 5",
    "publishing_ids contains 18446744073709551615", "publishing_ids contains -1",
    "publishing_ids", "not publishing_ids", 'publishing_ids == 3', 'publishing_ids contains "5"',
    "committed_chunk_id == null", "committed_chunk_id != null",
    "committed_chunk_id > 18446744073709551600", "committed_chunk_id <= 18446744073709551616",
    "committed_chunk_id >= 2.5", "chunk.chunk_id < 3", "chunk.epoch != 0", "chunk.crc",
    'chunk contains "crc"', "chunk contains 1", "chunk", "chunk == null", "chunk.nothing",
    "chunk.chunk_id.deeper == 1", "crc_ok == false", "crc_ok", "crc_ok == null",
    "crc_ok != true", "record_count >= 10", "entry_count == 1.0", "size > 1e999",
    "size < -1e999", "publisher_id < -1", "publisher_id == true", 'publisher_id == "0"',
    "publisher_id contains 0", 'record_count matches "1"',
)  # fmt: skip
COMMON_FILTERS = (
    "ts_ns > 0", "ts_ns > 1795308251144356000", "ts_ns <= 1.7953082511443561e18",
    'connection contains ":5553"', 'connection matches "55[0-9]+$"', 'direction == "s2c"',
    'direction < "d"', "stream_offset < 1000", "stream_offset", "version == 2", "size <= 94",
    "key == 0x0009", "key != 8", "response", "not response", "code == null", "code != 1",
    'code_name matches "OK"', "truncated == false", "truncated == 0", "correlation_id != 3",
    "correlation_id", 'command matches "^Publish"', 'command < "E"',
    'command == "Heartbeat" or (command == "Credit" and credit == 1)',
    "not (size > 100 and direction == \"c2s\")",
)  # fmt: skip
OTHER_FILTERS = (
    'stream contains "a"', "reference", 'command == "Anomaly"', 'kind == "midstream_start"',
    'mechanism == "PLAIN"', "ts_ns.x", "frame_max > 0 or heartbeat", "closing_code != null",
)  # fmt: skip
FILTERS = HOT_FILTERS + COMMON_FILTERS + OTHER_FILTERS
WORSE = {"reorder": worsen.reorder, "duplicate": worsen.duplicate,
         "snaplen": lambda p: worsen.snaplen(p, 150),
         "midstream": lambda p: worsen.midstream(p, len(p) // 3)}  # fmt: skip


def _made_worse(how: str, capture: Path, directory: Path) -> Path:
    linktype, packets = worsen.read_pcap(capture)
    return worsen.write_pcap(directory / f"{how}-{capture.name}", linktype,
                             WORSE[how](packets))  # fmt: skip


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """Every shipped capture, each made worse each way (worse-HOW: the largest), and a
    capture of odd hot frames (v2 Deliver, huge ids, a bad CRC, a negative credit)."""
    directory = tmp_path_factory.mktemp("frames-columns")
    found = {p.stem: p for p in worsen.corpus_captures()}
    for how in WORSE:
        for capture in worsen.corpus_captures():
            found[f"worse-{how}-{capture.stem}"] = _made_worse(how, capture, directory)
        found[f"worse-{how}"] = found[f"worse-{how}-{worsen.real_capture().stem}"]
    found["odd"] = _odd_hot_capture(directory)
    return found


NAMES = [p.stem for p in worsen.corpus_captures()] + [f"worse-{how}" for how in WORSE] + ["odd"]
EVERY_WORSE = [f"worse-{how}-{p.stem}" for how in WORSE for p in worsen.corpus_captures()]


@cache
def _events(path: Path, reference: bool) -> tuple:
    """The events of the CLI's run (hot runs as columns) or of the reference path."""
    options = {"engine": "stream"} if reference else {"columns": "lines"}
    return tuple(Dissector(ports=(5552, 5553), publish_messages=False, **options).run(str(path)))


def _printed(events: tuple, text: bool, expression: str | None = None,
             count: int | None = None) -> tuple[str, str]:  # fmt: skip
    """(stdout, stderr) of `frames` over the events, as its writers print them."""
    out, err = io.StringIO(), io.StringIO()
    write = text_writer(out, err, False) if text else jsonl_writer(out, False, False)
    if expression is not None or count is not None:
        test = None if expression is None else compile_filter(expression, filter_fields())
        write = selecting(write, test, False, count)
    for event in events:
        if write(event) is False:
            break
    return out.getvalue(), err.getvalue()


def _counts(events: tuple) -> list[int]:
    """Counts for -c: 1, each that ends inside a hot run (one past its first frame, its middle),
    all the frames and more."""
    counts, seen = [1], 0
    for event in events:
        if event.__class__ is HotFrames:
            if len(event) > 1:
                counts += [seen + 2, seen + (len(event) + 1) // 2]
            seen += len(event)
        elif event.__class__ is FrameEvent:
            seen += 1
    return sorted(set(counts[:7])) + [seen, seen + 3]


@pytest.mark.parametrize("name", NAMES + EVERY_WORSE)
def test_text_and_count_are_the_record_paths_bytes(inputs, name):
    path = inputs[name]
    fast, reference = _events(path, False), _events(path, True)
    assert _printed(fast, True) == _printed(reference, True)
    for count in _counts(fast):
        for text in (True, False):
            assert _printed(fast, text, None, count) == _printed(reference, text, None, count)


@pytest.mark.parametrize("name", NAMES)
def test_display_filters_are_the_record_paths_bytes(inputs, name):
    path = inputs[name]
    fast, reference = _events(path, False), _events(path, True)
    counts = _counts(fast)
    for expression in FILTERS:
        for text in (True, False):
            assert _printed(fast, text, expression) == _printed(reference, text, expression), (
                expression)
        count = counts[len(expression) % len(counts)]
        assert _printed(fast, True, expression, count) == _printed(reference, True, expression,
                                                                   count), (expression, count)


def test_the_runs_are_taken():
    """The capture with most hot traffic comes as runs, long ones (else the tests above
    compare the record path with itself)."""
    runs = [e for e in _events(worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap", False)
            if e.__class__ is HotFrames]  # fmt: skip
    assert runs and max(map(len, runs)) > 50


def _value(col, i: int):
    if col.__class__ is Constant:
        return col.value
    if col.__class__ is Category:
        return col.values[col.codes[i]]
    if col.__class__ is IntLists:
        return col.items[col.frame_of == i].tolist()
    valid = col.valid is None or col.valid[i]
    return col.values[i].item() if valid else None


@pytest.mark.parametrize("name", NAMES)
def test_run_columns_are_the_jsonl_dicts(inputs, name):
    """Each field of each frame of each run, as the columns give it to -Y and the text, is its
    jsonl line's; a field a line does not have is MISSING."""
    for run in (e for e in _events(inputs[name], False) if e.__class__ is HotFrames):
        for i, line in enumerate(run_lines(run).splitlines()):
            row, rows, key = json.loads(line), np.array([i]), int(run.key[i])
            names = ("ts_ns", "connection", "direction", "stream_offset", "key", "command",
                     "response", "version", "size", "correlation_id", "code", "code_name",
                     "truncated", *BODIES[key])  # fmt: skip
            assert list(row) == list(names)
            for field, want in row.items():
                got = _value(column(run, rows, key, (field,)), 0)
                assert (set(got) if field == "chunk" else got) == (
                    set(want) if field == "chunk" else want), field
            for inner in CHUNK_COLUMN if "chunk" in row else ():
                assert _value(column(run, rows, key, ("chunk", inner)), 0) == row["chunk"][inner]
            for field in sorted(filter_fields() - set(row)):
                assert _value(column(run, rows, key, (field,)), 0) is MISSING, field


@pytest.mark.parametrize("name", NAMES)
def test_filters_over_columns_are_the_per_frame_filters(inputs, name):
    """run_mask over a run's columns selects what each frame's dict test selects."""
    tests = [compile_filter(expression, filter_fields()) for expression in FILTERS]
    for run in (e for e in _events(inputs[name], False) if e.__class__ is HotFrames):
        rows = [json.loads(line) for line in run_lines(run).splitlines()]
        for expression, test in zip(FILTERS, tests):
            assert run_mask(test, run).tolist() == [test(row) for row in rows], expression


TRUTH_COMMANDS = ("Credit", "Heartbeat", "Publish", "PublishConfirm", "Deliver")


@pytest.mark.parametrize("truth", worsen.corpus_truths(), ids=lambda p: p.stem)
def test_filtered_text_counts_are_the_clients(truth, capsys):
    """`frames -Y` through the command line: the hot frames of each command and direction
    are as many as the clients wrote and read."""
    facts = json.loads(truth.read_text())
    capture = truth.parent / facts["capture"]
    for command in TRUTH_COMMANDS:
        key = f"0x{message_spec(command).key:04x} "
        for direction in ("c2s", "s2c"):
            want = sum(n for c in facts["connections"]
                       for k, n in c["frames"][direction].items() if k.startswith(key))  # fmt: skip
            expression = f'command == "{command}" and direction == "{direction}" and not response'
            assert main(["frames", str(capture), "-Y", expression]) == 0
            assert len(capsys.readouterr().out.splitlines()) == want, (command, direction)


def test_command_line_is_the_reference(inputs, capsys):
    """The command itself (its engine, helper process and writers) prints the reference's
    bytes for text, -c through a run and -Y."""
    path = inputs["rstream-slow-consumer-3.10"]
    reference = _events(path, True)
    cut = _counts(_events(path, False))[1]
    for arguments, expression, count in (([], None, None), (["-c", str(cut)], None, cut),
                                         (["-Y", "credit == 1 or chunk.chunk_id > 40"],
                                          "credit == 1 or chunk.chunk_id > 40", None)):  # fmt: skip
        assert main(["frames", str(path), "--port", "5552", "--port", "5553", *arguments]) == 0
        printed = capsys.readouterr()
        assert (printed.out, printed.err) == _printed(reference, True, expression, count)


@pytest.mark.parametrize("name", ["rstream-slow-consumer-3.10", "worse-duplicate", "odd"])
def test_run_text_of_any_frames_of_a_run_is_their_summaries(inputs, name):
    """run_text of frames picked from a run in any order (alike at first and not later, the
    run backwards, shuffled) is each frame's line made from its jsonl dict by
    fields_summary, the summary of the record path."""
    from streamdissect.cli._text_columns import ARROWS, LINE, SIDE, run_text
    from streamdissect.protocols.stream.summary import fields_summary

    shuffle = np.random.default_rng(25).permutation
    for run in (e for e in _events(inputs[name], False) if e.__class__ is HotFrames):
        n = len(run)
        for picked in (np.r_[0, 0, 0:n], np.arange(n)[::-1], shuffle(n), np.r_[0:n, 0:n]):
            frames = run.take(picked)
            first = int(frames.ts_ns[0])
            rows = [json.loads(line) for line in run_lines(frames).splitlines()]
            want = "".join(LINE % (i + 7, (row["ts_ns"] - first) / 1e9,
                                   SIDE % (row["connection"], ARROWS[row["direction"]]),
                                   fields_summary(row, row["command"]))
                           for i, row in enumerate(rows))  # fmt: skip
            assert run_text(frames, np.arange(len(frames)), 7, first) == want

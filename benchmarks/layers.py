#!/usr/bin/env python3
"""Where `streamdissect analyze --format json FILE` spends its CPU, layer by layer.

    PYTHONPATH=TREE python benchmarks/layers.py FILE [--runs 3] [--json PATH]
        [--wrap MODULE:ATTRIBUTE]...

Runs the command in this process (stdout to /dev/null) with the layers' entry points
wrapped by CPU-time counters (time.process_time: CPU, not wall, so other work on the
machine moves them little), `--runs` times, and prints the smallest figure of each layer.
The forked read/parse helper (capture.blocks) counts its own layers and reports them at its
exit. Interpreter start (python and site, before this script runs) is not in these
figures: `python -c pass` is its price. The wrappers cost a few calls per block, not per
frame. Works with the trees of older commits too (what a layer's entry point is called
has not changed since 4792fa0).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

MAIN_LAYERS = [
    # (label, module, attribute): the CPU spent inside, summed over the run
    ("packet columns (packets)", "streamdissect.engine.bulk", "packets"),
    ("TCP, vectorised (with the walk in it)", "streamdissect.engine.bulk", "BulkCapture._connections"),
    ("frame walk (framing.walk.walk)", "streamdissect.engine.bulk", "walk"),
    (
        "hot frame decode (end_block)",
        "streamdissect.protocols.stream.fast_path",
        "StreamFastPath.end_block",
    ),
    (
        "analysis: analyze_events (dissection in it)",
        "streamdissect.analysis.driver",
        "analyze_events",
    ),
    ("JSON: to_json", "streamdissect.cli.analyze", "to_json"),
    ("JSON: json_write", "streamdissect.cli.analyze", "json_write"),
]
HELPER_LAYERS = [
    ("helper: record walk (walk_records)", "streamdissect.capture.blocks", "walk_records"),
    ("helper: packet parse (parse_packets)", "streamdissect.engine.bulk", "_HelperParse.__call__"),
]


def _resolve(module: str, attribute: str):
    import importlib

    owner = importlib.import_module(module)
    *path, name = attribute.split(".")
    for part in path:
        owner = getattr(owner, part)
    return owner, name


def _wrap(sums: dict, label: str, module: str, attribute: str) -> None:
    owner, name = _resolve(module, attribute)
    inner = getattr(owner, name)

    def timed(*args, **kwargs):
        start = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            sums[label] = sums.get(label, 0.0) + time.process_time() - start

    setattr(owner, name, timed)


def _count_dissection(sums: dict) -> None:
    """The CPU inside the bulk engine's batches (every block's dissection, the waits for the
    helper included, as CPU: none)."""
    from streamdissect.engine import bulk

    batches = bulk.BulkCapture.batches
    label = "dissection: all (BulkCapture.batches)"

    def counted(self):
        it = batches(self)
        while True:
            start = time.process_time()
            try:
                batch = next(it)
            except StopIteration:
                return
            finally:
                sums[label] = sums.get(label, 0.0) + time.process_time() - start
            yield batch

    bulk.BulkCapture.batches = counted


def _count_hot_handlers(sums: dict) -> None:
    """Each collector's on_hot (the hot frames as columns), apart."""
    from streamdissect.protocols.stream.analysis import collectors

    handlers = collectors.Collectors.hot_handlers

    def counted(self):
        out = []
        for handler in handlers(self):
            label = "collector: " + handler.__qualname__

            def timed(run, handler=handler, label=label):
                start = time.process_time()
                try:
                    return handler(run)
                finally:
                    sums[label] = sums.get(label, 0.0) + time.process_time() - start

            out.append(timed)
        return tuple(out)

    collectors.Collectors.hot_handlers = counted


def one_run(argv: list[str], extra: list[str] = ()) -> None:
    """(In a child process.) The command once, its layers' CPU as one JSON line on stderr;
    the helper's as another."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    import gc

    from streamdissect import cli

    words = argv
    try:  # (a tree of before the CLI imported only the subcommand run)
        parser = cli.build_parser(words[0])
    except TypeError:
        parser = cli.build_parser()
    imports = time.process_time() - cpu0
    main: dict = {}
    helper: dict = {}
    for layer in MAIN_LAYERS:
        _wrap(main, *layer)
    for spec in extra:
        module, attribute = spec.split(":")
        _wrap(main, "wrapped: " + spec, module, attribute)
    for layer in HELPER_LAYERS:
        _wrap(helper, *layer)
    from streamdissect.capture import blocks

    helper_body = blocks._helper

    def counted_helper(*args):
        t0 = os.times()
        try:
            helper_body(*args)
        finally:
            t1 = os.times()
            helper["helper: CPU in all (user + sys)"] = (t1.user - t0.user) + (
                t1.system - t0.system
            )
            print("LAYERS-HELPER " + json.dumps(helper), file=sys.stderr, flush=True)

    blocks._helper = counted_helper
    _count_dissection(main)
    _count_hot_handlers(main)
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)  # (as cli.command)
    args = parser.parse_args(words)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    run0 = time.process_time()
    args.handler(args)
    sys.stdout.flush()
    main["start: imports and parser (after the interpreter's start)"] = imports
    main["main: CPU in all (after the interpreter's start)"] = time.process_time() - cpu0
    main["main: wall (after the interpreter's start)"] = time.perf_counter() - wall0
    main["main: run (imports of the engine in it)"] = time.process_time() - run0
    print("LAYERS-MAIN " + json.dumps(main), file=sys.stderr, flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", metavar="PATH", help="also write the figures here")
    ap.add_argument("--wrap", action="append", default=[], metavar="MODULE:ATTRIBUTE",
                    help="a further function to count in the main process (repeatable)")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    command = ["analyze", "--format", "json", args.file]
    if args.one:
        one_run(command, args.wrap)
        return 0
    best: dict = {}
    for _ in range(args.runs):
        wraps = [word for spec in args.wrap for word in ("--wrap", spec)]
        out = subprocess.run([sys.executable, __file__, "--one", args.file, *wraps],
                             capture_output=True, text=True, check=True).stderr  # fmt: skip
        for tag, text in re.findall(r"^(LAYERS-\w+) (.*)$", out, re.MULTILINE):
            for name, value in json.loads(text).items():
                best[name] = min(best.get(name, value), value)
    for name in sorted(best, key=lambda n: (n.startswith("helper"), n)):
        print(f"{best[name]:8.3f}  {name}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(best, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

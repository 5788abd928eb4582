"""The command line: `streamdissect SUBCOMMAND ...`.

Each module of this package that has a `register(subparsers)` function is a subcommand: it
adds its parser and sets `handler` (a face adds a module here; the core imports none of
them). Registering imports only the module, so a subcommand keeps its heavy imports inside
its handler. main() only dispatches.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.machinery
import os
import sys
from functools import cache

from streamdissect.cli import env  # noqa: F401  (its settings, made before numpy is imported)
from streamdissect.engine.gc_setting import bulk_gc

# The subcommands first in --help, in this order; any other module after them, by name.
FIRST = ("frames", "analyze")


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("streamdissect")
    except PackageNotFoundError:  # (run from a source tree that was never installed)
        return "unknown"


def subcommand_modules() -> list[str]:
    return list(_listed())


@cache
def _listed() -> tuple[str, ...]:
    """The subcommands' module names, listed once a process (command() and main() both ask)."""
    found = {name for folder in __path__ for name in _module_names(folder)
             if name != "env" and not name.startswith("_")}
    return (*(n for n in FIRST if n in found), *sorted(found - set(FIRST)))


def _module_names(folder: str) -> set[str]:
    """The modules and packages in `folder`, named as pkgutil.iter_modules names them (a
    file by its longest module suffix; a folder without a dot holding an __init__), without
    importing pkgutil at the start. (Measured since: numpy imports inspect and typing on
    every analyze anyway, and pkgutil's own import then costs ~0.5 ms: a small saving.)"""
    suffixes = sorted(importlib.machinery.all_suffixes(), key=len, reverse=True)

    def module_name(file_name: str) -> str | None:
        return next((file_name[:-len(s)] for s in suffixes if file_name.endswith(s)), None)

    try:
        entries = list(os.scandir(folder))
    except OSError:
        return set()
    names = set()
    for entry in entries:
        name = module_name(entry.name)
        if not name and entry.is_dir() and "." not in entry.name:
            try:
                inside = os.listdir(entry.path)
            except OSError:
                inside = []
            name = entry.name if any(module_name(f) == "__init__" for f in inside) else None
        if name and name != "__init__" and "." not in name:
            names.add(name)
    return names


class _Version(argparse._VersionAction):
    """--version, the installed version looked up only when asked (importlib.metadata and
    the lookup are ~0.01 s of every start otherwise)."""

    def __call__(self, parser, namespace, values, option_string=None):
        self.version = f"streamdissect {version()}"
        super().__call__(parser, namespace, values, option_string)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; `only`: with that subcommand alone (the one being run:
    importing every other, numpy and pyarrow users among them, is ~0.02-0.03 s of a start)."""
    parser = argparse.ArgumentParser(
        prog="streamdissect", description="Dissect and analyse captures of RabbitMQ Stream (TCP 5552) and RocketMQ "
        "remoting (9876, 10911) traffic."
    )
    parser.add_argument("--version", action=_Version)
    subparsers = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    for name in subcommand_modules():
        if only is not None and name != only:
            continue
        module = importlib.import_module(f"{__name__}.{name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    named = words[0] if words and words[0] in subcommand_modules() else None
    args = build_parser(named).parse_args(argv)
    return args.handler(args)


def command() -> None:
    """The `streamdissect` command: main(), then out of the process at once.

    The objects made while importing live as long as the process: the subcommand's module
    and what it imports (numpy, the protocol tables) are imported with the cyclic garbage
    collector off and then frozen, so that the collector never walks them (three
    young-generation collections walked them during the imports, ~0.006 s of every start).
    The records and events of a run make no reference cycles, so the collector runs at the
    library's bulk pace (engine.gc_setting.bulk_gc). At the end, the interpreter's teardown
    (freeing every module and object one by one, ~0.05 s after a large capture) does nothing
    a finished command needs, so the output is flushed and the process exits without it."""
    _imported_frozen(sys.argv[1:])
    with bulk_gc():
        code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # a reader gone, or closed: nothing to flush to
            pass
    os._exit(code)


def _imported_frozen(words: list[str]) -> None:
    """The module of the subcommand `words` name imported (if they name one) with the
    collector off, and the modules its handler imports as it runs (its RUN_IMPORTS: imported
    after the freeze, their objects are young ones a collection during the run walks);
    everything made so far frozen."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        if words and words[0] in subcommand_modules():
            module = importlib.import_module(f"{__name__}.{words[0]}")
            for name in getattr(module, "RUN_IMPORTS", ()):
                importlib.import_module(name)
    finally:
        gc.freeze()
        if enabled:
            gc.enable()

#!/usr/bin/env python3
"""A Python environment holding streamdissect as its users install it, to time it there.

    python benchmarks/installed.py [DIR] [--source ROOT]     # prints DIR/bin/python

A developer's environment is not a user's: an editable install (`pip install -e`) puts a
finder on the path that every interpreter start imports (pathlib, urllib, ipaddress: ~8 ms
here), and a machine may carry other start-up hooks (.pth files) of its own. A command that
takes 0.3 s loses several per cent of its time to them, so the speed targets are measured in
a fresh virtual environment (no system site-packages) with the package installed from the
source tree as a wheel would be (`pip install ROOT`, byte-compiled, its C extensions built)
and every dependency at the version this interpreter has (its `pip freeze` as constraints:
the same numpy and pyarrow, so only the start-up differs). The benchmarks take it with
`--python DIR/bin/python`; the package is installed anew each time this runs (the
dependencies once).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT = HERE / "out" / "installed"


def constraints() -> str:
    """This interpreter's packages at their versions (streamdissect and editable ones out)."""
    frozen = subprocess.run([sys.executable, "-m", "pip", "freeze"], capture_output=True,
                            text=True, check=True).stdout.splitlines()  # fmt: skip
    keep = [line for line in frozen
            if "==" in line and not line.lower().startswith("streamdissect")]  # fmt: skip
    return "\n".join(keep) + "\n"


def make(folder: Path, source: Path) -> Path:
    python = folder / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as pinned:
        pinned.write(constraints())
        pinned.flush()
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, "-c", pinned.name, str(source)], check=True)  # (deps once)
        # the package itself anew from the tree as it is now (not -e: as users have it)
        subprocess.run([*pip, "--no-deps", "--force-reinstall", str(source)], check=True)
    return python


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--source", type=Path, default=HERE.parent,
                    help="the source tree to install (default: this checkout)")
    args = ap.parse_args(argv)
    print(make(args.folder.resolve(), args.source.resolve()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

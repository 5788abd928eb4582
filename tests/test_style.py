"""The code's style: `ruff check` (pyproject.toml's [tool.ruff], ruff in the test extras, so
this runs wherever the tests do) finds nothing in the package, the tests or the benchmarks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache",
                           "streamdissect", "tests", "benchmarks"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr

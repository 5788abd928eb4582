"""benchmarks/fuzz.py loaded for the fuzz tests (it lives outside the package on purpose)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "fuzz.py"
REGRESSIONS = Path(__file__).resolve().parent / "regressions"


def load():
    if "streamdissect_fuzz" not in sys.modules:
        spec = importlib.util.spec_from_file_location("streamdissect_fuzz", PATH)
        module = importlib.util.module_from_spec(spec)
        sys.modules["streamdissect_fuzz"] = module
        spec.loader.exec_module(module)
    return sys.modules["streamdissect_fuzz"]

"""The compiled walk (protocols/stream/_native.c): loaded when built, switched off by
STREAMDISSECT_NATIVE=0, equal to the Python walk on the corpus' streams cut into random
segments and on mutated ones (benchmarks/fuzz_native.py, as the fuzz campaign checks it),
and refusing inconsistent inputs with a ValueError instead of reading outside its buffers.
(The reports of both walks against the per-packet reference: test_bulk_engine.py,
test_input_forms.py, test_equal_runs.py run in both modes, native_modes.)"""

from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys
from array import array

import pytest
from test_fuzz_harness import load

from streamdissect.protocols.stream import hot, native

NAME = "streamdissect.protocols.stream._native"
BUILT = importlib.util.find_spec(NAME) is not None
COMPILED = importlib.import_module(NAME) if BUILT else None  # (also when switched off)
WANTED = os.environ.get(native.ENV, "")
needs_build = pytest.mark.skipif(
    not BUILT, reason="the C extension was not built (no C compiler at install): the Python "
    "walk runs; STREAMDISSECT_NATIVE=1 makes a missing build an error")  # fmt: skip


def test_extension_loaded_when_built():
    """Built, it is what runs (unless switched off); wanted (=1), it must be there: a build
    that failed quietly (setup.py's extension is optional) fails here."""
    if WANTED == "0":
        assert native.loaded is None
    elif BUILT or WANTED == "1":
        assert native.loaded is not None and native.loaded.__name__ == NAME
    else:
        assert native.loaded is None  # (nothing built: the Python walk)


@pytest.mark.parametrize(("wanted", "expected"), [("0", "None"), ("", NAME), ("1", NAME)])
@needs_build
def test_environment_variable_chooses(wanted, expected):
    code = "from streamdissect.protocols.stream import native as n; print(getattr(n.loaded, '__name__', None))"
    env = {**os.environ, native.ENV: wanted}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.strip()  # fmt: skip
    assert out == expected


@needs_build
def test_walks_equal_on_corpus_and_mutated_streams(monkeypatch):
    monkeypatch.setattr(native, "loaded", COMPILED)
    fuzz = load()
    import fuzz_native  # (beside fuzz.py, on the path it set)

    rng = random.Random(25)
    streams = fuzz.corpus_streams()
    compared = sum(fuzz_native.check_native_walk(s[: 64 * 1024], rng)
                   for s in streams for _ in range(3))  # fmt: skip
    mutator = fuzz.StreamMutator(rng, streams, fuzz.FrameMutator(
        rng, fuzz.corpus_frames(streams) + fuzz.crafted_frames(rng)))  # fmt: skip
    compared += sum(fuzz_native.check_native_walk(mutator.mutate(), rng) for _ in range(500))
    assert compared == 3 * len(streams) + 500


def _args(**changed):
    """hot_run's arguments for two 12-byte segments of two Credits in a 40-byte buffer."""
    frame = (7).to_bytes(4, "big") + hot.CREDIT_KEY.to_bytes(2, "big") + b"\x00\x01\x05\x00\x0a"
    buf = bytearray(4) + frame[:9] + bytearray(3) + frame[9:] + frame + bytearray(40)
    heads = array("q", [int.from_bytes(buf[4:12], "little"), int.from_bytes(buf[16:24], "little")])
    args = {"buf": bytes(buf), "so": array("q", [0, 9]), "lo": array("q", [9, 13]),
            "po": array("q", [4, 16]), "heads": heads, "send": 22, "pos": 0, "j": 0,
            "hot": native.hot_mask(hot.HOT_KEYS), "low": 100, "limit": 1000}  # fmt: skip
    args.update(changed)
    return list(args.values())


@needs_build
def test_hot_run_reads_across_segments():
    end, starts, segs, big = COMPILED.hot_run(*_args())
    assert (end, array("q", starts).tolist(), array("q", segs).tolist(), big) == (22, [0, 11],
                                                                                  [0, 1], [])
    end, starts, _, big = COMPILED.hot_run(*_args(low=4))  # (size 7 > low: big)
    assert (end, array("q", starts).tolist(), big) == (22, [0, 11], [0, 1])


@needs_build
@pytest.mark.parametrize("changed", [
    {"lo": array("q", [9])},  # arrays of different lengths
    {"po": array("q", [4, 1 << 40])},  # a segment past the buffer's end
    {"po": array("q", [4, -20])},  # ... before its start
    {"heads": array("q", [0])},  # a head missing
    {"j": 2}, {"j": -1},  # no such segment
    {"so": array("i", [0, 9])},  # items of 4 bytes
    {"hot": b"\x01" * 10},  # not a byte a key
    {"so": array("q", [0, 100])},  # a gap between segments (in-order ones have none)
], ids=["lengths", "po-past", "po-before", "heads", "j-past", "j-before", "itemsize", "mask",
        "gap"])  # fmt: skip
def test_hot_run_refuses_inconsistent_input(changed):
    with pytest.raises(ValueError):
        COMPILED.hot_run(*_args(**changed))

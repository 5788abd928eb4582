"""The compiled loops (protocols/stream/_native.c; RocketMQ's, protocols/rocketmq/_native.c,
loaded the same way, held to its Python path in test_rocketmq_hot.py and
test_rocketmq_plain_walk.py): loaded when built, switched off by
STREAMDISSECT_NATIVE=0, the walk and the hot frames' decode equal to the Python ones on the
corpus' streams (cut into random segments) and on mutated ones (benchmarks/fuzz_native.py,
as the fuzz campaign checks them), and refusing inconsistent inputs with a ValueError
instead of reading outside their buffers.
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

from streamdissect.capture.native import ENV
from streamdissect.protocols.rocketmq import native as rocketmq_native
from streamdissect.protocols.stream import hot, native

NAME = "streamdissect.protocols.stream._native"
ROCKETMQ_NAME = "streamdissect.protocols.rocketmq._native"
BUILT = importlib.util.find_spec(NAME) is not None
COMPILED = importlib.import_module(NAME) if BUILT else None  # (also when switched off)
WANTED = os.environ.get(ENV, "")
needs_build = pytest.mark.skipif(
    not BUILT, reason="the C extension was not built (no C compiler at install): the Python "
    "walk runs; STREAMDISSECT_NATIVE=1 makes a missing build an error")  # fmt: skip


# each compiled part's loader (its protocol's native.py) and module name
LOADERS = {"stream": (native, NAME), "rocketmq": (rocketmq_native, ROCKETMQ_NAME)}


@pytest.mark.parametrize("part", sorted(LOADERS))
def test_extension_loaded_when_built(part):
    """Built, it is what runs (unless switched off); wanted (=1), it must be there: a build
    that failed quietly (setup.py's extensions are optional) fails here."""
    loader, name = LOADERS[part]
    if WANTED == "0":
        assert loader.loaded is None
    elif importlib.util.find_spec(name) is not None or WANTED == "1":
        assert loader.loaded is not None and loader.loaded.__name__ == name
    else:
        assert loader.loaded is None  # (nothing built: the Python walk)


@pytest.mark.parametrize("part", [
    pytest.param(part, marks=pytest.mark.skipif(importlib.util.find_spec(name) is None,
                                                reason=f"{name} was not built"))
    for part, (_loader, name) in sorted(LOADERS.items())])  # fmt: skip
@pytest.mark.parametrize("wanted", ["0", "", "1"])
def test_environment_variable_chooses(part, wanted):
    loader, name = LOADERS[part]
    code = (f"from {loader.__name__} import loaded; "
            "print(getattr(loaded, '__name__', None))")  # fmt: skip
    env = {**os.environ, ENV: wanted}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.strip()  # fmt: skip
    assert out == ("None" if wanted == "0" else name)


def test_rocketmq_reader_not_loaded_for_another_spec(monkeypatch):
    """The spec's keys, separators, magics or the stored message's layout changed: the C
    code is behind, so the Python path runs (and =1 says so)."""
    assert rocketmq_native._spec_now() == rocketmq_native._SPEC_READ
    monkeypatch.setattr(rocketmq_native, "_spec_now", lambda: ("another",))
    monkeypatch.setenv(ENV, "")
    assert rocketmq_native._load() is None
    monkeypatch.setenv(ENV, "1")
    with pytest.raises(ImportError):
        rocketmq_native._load()


@needs_build
@pytest.mark.parametrize("check", ["check_native_walk", "check_native_decode"])
def test_equal_on_corpus_and_mutated_streams(monkeypatch, check):
    monkeypatch.setattr(native, "loaded", COMPILED)
    fuzz = load()
    import fuzz_native  # (beside fuzz.py, on the path it set)

    compare = getattr(fuzz_native, check)
    rng = random.Random(25)
    streams = fuzz.corpus_streams()
    compared = sum(compare(s[: 64 * 1024], rng) for s in streams for _ in range(3))
    mutator = fuzz.StreamMutator(rng, streams, fuzz.FrameMutator(
        rng, fuzz.corpus_frames(streams) + fuzz.crafted_frames(rng)))  # fmt: skip
    compared += sum(compare(mutator.mutate(), rng) for _ in range(500))
    # (every stream compared, but those with no whole frame to decode)
    assert compared > 2 * len(streams) + 400


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


def _decode_args(**changed):
    """hot_decode's arguments for one Credit at 0 in a padded buffer."""
    import numpy as np

    from streamdissect.protocols.stream import hot_native

    frame = (7).to_bytes(4, "big") + hot.CREDIT_KEY.to_bytes(2, "big") + b"\x00\x01\x05\x00\x0a"
    words, names = hot_native.plan(False)
    n = 1
    empty = np.zeros(0, dtype=np.int64)
    args = {"data": frame + bytes(hot.PAD), "starts": np.zeros(n, dtype=np.int64), "plan": words,
            "columns": [(np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)) for _ in names],
            "key": np.zeros(n, dtype=np.int64), "version": np.zeros(n, dtype=np.int64),
            "size": np.zeros(n, dtype=np.int64), "accepted": np.zeros(n, dtype=bool),
            "id_counts": np.zeros(n, dtype=np.int64), "id_starts": np.zeros(n, dtype=np.int64),
            "crc_limit": 0, "message_rows": empty, "message_counts": empty,
            "message_starts": empty, "message_at": empty}  # fmt: skip
    args.update(changed)
    return args


@needs_build
def test_hot_decode_of_a_credit():
    args = _decode_args()
    COMPILED.hot_decode(*args.values())
    names = list(hot.FIELD_COLUMNS)
    columns = dict(zip(names, args["columns"]))
    assert args["accepted"].tolist() == [True] and args["key"].tolist() == [hot.CREDIT_KEY]
    assert columns["subscription_id"][0].tolist() == [5] and columns["credit"][0].tolist() == [10]


@needs_build
@pytest.mark.parametrize("changed", [
    {"plan": [0, 1, 2]},  # a plan cut short
    {"key": [0, 0]},  # a list, and of another length
    {"starts": b"\x00" * 12},  # not 8-byte items
    {"message_rows": b"\x00" * 8},  # message arrays of different lengths
], ids=["plan", "key", "starts", "messages"])  # fmt: skip
def test_hot_decode_refuses_inconsistent_input(changed):
    import numpy as np

    changed = {name: np.asarray(value, dtype=np.int64) if isinstance(value, list) else value
               for name, value in changed.items()}  # fmt: skip
    with pytest.raises((ValueError, TypeError)):
        COMPILED.hot_decode(*_decode_args(**changed).values())


@needs_build
def test_hot_decode_refuses_a_plan_reading_past_a_head():
    from streamdissect.protocols.stream import hot_native

    words = hot_native.plan(False)[0].copy()
    words[6] = 1000  # (a PublishConfirm's count read past its head)
    with pytest.raises(ValueError, match="outside the heads"):
        COMPILED.hot_decode(*_decode_args(plan=words).values())


@needs_build
def test_hot_decode_declines_a_frame_past_the_data():
    import numpy as np

    args = _decode_args(starts=np.array([1 << 40], dtype=np.int64))
    COMPILED.hot_decode(*args.values())
    assert args["accepted"].tolist() == [False]


@needs_build
def test_copy_ranges_copies_across_segments():
    buf = bytearray(b"..abc...defg" + bytes(16))
    so, lo, po = array("q", [0, 3]), array("q", [3, 4]), array("q", [2, 8])
    starts, ends = array("q", [1, 0]), array("q", [6, 2])
    COMPILED.copy_ranges(buf, so, lo, po, starts, ends, 14)
    assert bytes(buf[14:21]) == b"bcdefab"


@needs_build
@pytest.mark.parametrize(("starts", "ends", "dest"), [
    ([0], [8], 14),  # past the segments' end
    ([0], [3], 27),  # a copy past the buffer's end
    ([2], [1], 14),  # a range that ends before it starts
    ([0, 1], [2], 14),  # starts and ends of different lengths
], ids=["past-segments", "past-buffer", "backwards", "lengths"])  # fmt: skip
def test_copy_ranges_refuses_inconsistent_input(starts, ends, dest):
    buf = bytearray(b"..abc...defg" + bytes(16))
    so, lo, po = array("q", [0, 3]), array("q", [3, 4]), array("q", [2, 8])
    with pytest.raises(ValueError):
        COMPILED.copy_ranges(buf, so, lo, po, array("q", starts), array("q", ends), dest)

"""ExactSample (a sample kept as its distinct values and their counts) gives the percentiles
of the whole sample to the last bit: summarize_sample against summarize_ms of the list of
values itself (numpy's "linear" percentiles), for samples folded many times, with repeats,
a NaN, infinities and zeros."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from streamdissect.analysis.percentiles import ExactSample, summarize_ms, summarize_sample


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k] == b[k] or (a[k] is not None and math.isnan(a[k]) and math.isnan(b[k])) for k in a)


@pytest.mark.parametrize("fold", [1, 7, ExactSample.FOLD])
def test_percentiles_are_the_whole_samples(fold, monkeypatch):
    monkeypatch.setattr(ExactSample, "FOLD", fold)
    for seed in range(200):
        rnd = random.Random(seed)
        values = [rnd.choice((rnd.randint(0, 30) / 1e3, rnd.randint(0, 9) * 3.7, rnd.random()))
                  for _ in range(rnd.randint(0, 80))]  # fmt: skip
        if seed % 17 == 0:
            values.append(math.inf)
        if seed % 23 == 0:
            values.append(math.nan)
        sample = ExactSample()
        half = len(values) // 2
        for v in values[:half]:
            sample.append(v)
        sample.extend(values[half:])
        assert len(sample) == len(values)
        assert _same(summarize_sample(sample), summarize_ms(values)), seed
        assert list(sample)[: len(values) - (seed % 23 == 0)] == sorted(
            v for v in values if not math.isnan(v))  # (in ascending order, NaN last)


def test_memory_is_a_distinct_value():
    """A million confirms of 500 distinct lags: 500 values kept, the same percentiles as
    numpy's over the million."""
    rnd = np.random.default_rng(5)
    values = rnd.integers(0, 500, 1_000_000) / 1e3
    sample = ExactSample()
    for at in range(0, len(values), 10_000):
        sample.extend(values[at : at + 10_000].tolist())
    kept, counts = sample.distinct()
    assert len(kept) == 500 and int(counts.sum()) == 1_000_000
    got = summarize_sample(sample)
    for p in (50, 75, 95, 99):
        assert got[f"p{p}_ms"] == float(np.percentile(values, p))

"""float.__repr__ of a column of floats at once, for the kind of value the JSON report has
most of: a delivery latency (consumer_lag), a capture time in ms (ns / 1e6, ~1.8e12: a
multiple of 2**-12 there) less a chunk's ms timestamp, so a multiple of 2**-12 too.

Such a value x, 0 <= x < 2**16, has an exact decimal expansion of w <= 12 fractional digits,
the last a 5; a decimal one digit shorter is at least 5e-12 away from it, more than half
x's float spacing (2**-37 at most below 2**16), so none rounds to x and repr(x) is that
expansion (positional: x is 0 or at least 2**-12). Its text is then the integer part and
the fraction's text from a table of 4,096: two cheap format items instead of float.__repr__'s
big-number digit generation (~0.4 us a value). Any other value: None, and float.__repr__.
"""

from __future__ import annotations

from array import array

import numpy as np

STEP_BITS = 12  # the values taken: multiples of 2**-STEP_BITS
LIMIT = 1 << 16  # and below this (see the module's note)
FEWEST = 32  # fewer values than this: float.__repr__ (numpy's fixed cost)

_fractions: np.ndarray | None = None  # fraction k * 2**-12 -> its text, ".0", ".000244140625", ...


def _fraction_texts() -> np.ndarray:
    global _fractions
    if _fractions is None:
        scale = 5**STEP_BITS  # k * 2**-12 == k * 5**12 * 10**-12
        texts = ["." + f"{k * scale:012d}".rstrip("0") for k in range(1 << STEP_BITS)]
        texts[0] = ".0"
        _fractions = np.array(texts, dtype=object)
    return _fractions


def exact_parts(values) -> list[list] | None:
    """[integer parts, fraction texts]: "%d%s" of the two is float.__repr__ of each value,
    when every value is a multiple of 2**-12 in [0, 2**16) (not -0.0); else None."""
    if len(values) < FEWEST:
        return None
    if isinstance(values, array):
        x = np.frombuffer(values, dtype=np.float64)
    else:
        x = np.fromiter(values, dtype=np.float64, count=len(values))
    if np.signbit(x).any() or not (x < LIMIT).all():  # (NaN and inf fail the second)
        return None
    scaled = x * (1 << STEP_BITS)  # (exact: a power of two)
    whole = scaled.astype(np.int64)
    if not (whole == scaled).all():
        return None
    return [(whole >> STEP_BITS).tolist(),
            _fraction_texts()[whole & ((1 << STEP_BITS) - 1)].tolist()]  # fmt: skip

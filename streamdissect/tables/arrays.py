"""Arrow columns as every table makes them: typed as tables.columns says (what a kind cannot
hold is null, never an exception), in the system allocator's memory, all-null ones sharing
one buffer of zeros."""

from __future__ import annotations

from typing import Any

from streamdissect.tables.columns import arrow_type as kind_type
from streamdissect.tables.columns import fit

ROWS_PER_BATCH = 16_384  # rows of a frames table's record batch

def as_array(values: Any, kind: str) -> Any:
    import pyarrow as pa

    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values
    return typed_array(values, kind)


def sparse_array(n: int, rows: list[int], values: list, kind: str) -> Any:
    """A column of `n` rows holding `values` at `rows`, null elsewhere."""
    import numpy as np
    import pyarrow as pa

    arrow_type = kind_type(kind)
    if not rows:
        return null_array(n, arrow_type)
    if len(rows) == n:  # (every row has it; rows come class by class, so put them in order)
        if any(row != at for at, row in enumerate(rows)):
            values = [values[i] for i in np.argsort(np.asarray(rows), kind="stable")]
        return typed_array(values, kind)
    if pa.types.is_integer(arrow_type) or pa.types.is_boolean(arrow_type):
        present = typed_array(values, kind)
        if present.null_count == 0:
            where = np.asarray(rows, dtype=np.int64)
            data = np.zeros(n, dtype=present.type.to_pandas_dtype())
            data[where] = present.to_numpy(zero_copy_only=False)
            mask = np.ones(n, dtype=bool)
            mask[where] = False
            return pa.array(data, arrow_type, mask=mask, memory_pool=pool())
    full: list = [None] * n
    for row, value in zip(rows, values):
        full[row] = value
    return typed_array(full, kind)


def pool() -> Any:
    """The memory pool of the frames' Arrow arrays: the system allocator's, whose freed
    memory numpy and pandas then reuse (pyarrow's default pool keeps it for Arrow alone: a
    frames table's peak RSS is ~10 MB higher with it)."""
    import pyarrow as pa

    return pa.system_memory_pool()


def take_strings(names: Any, numbers: Any) -> Any:
    """The strings `names[numbers[i]]` as a string column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.take(pa.array(names, pa.string()), numbers, memory_pool=pool())


_zeros: list = []  # one buffer of zero bytes that every all-null column reads


def null_array(n: int, arrow_type: Any) -> Any:
    """An all-null column of `n` rows whose buffers are slices of one shared zero buffer
    (pa.nulls allocates n values of zeros per column; a hot batch has a dozen such columns)."""
    import pyarrow as pa

    need = 8 * (n + 1)
    if not _zeros or _zeros[0].size < need:
        _zeros[:] = [pa.py_buffer(bytes(max(need, 1 << 20)))]
    zeros = _zeros[0]
    bits = zeros.slice(0, (n + 7) // 8)
    if pa.types.is_string(arrow_type):
        buffers = [bits, zeros.slice(0, 4 * (n + 1)), zeros.slice(0, 0)]
    elif pa.types.is_list(arrow_type):
        empty = pa.array([], arrow_type.value_type)
        return pa.Array.from_buffers(arrow_type, n, [bits, zeros.slice(0, 4 * (n + 1))],
                                     null_count=n, children=[empty])  # fmt: skip
    else:
        buffers = [bits, zeros.slice(0, max(arrow_type.bit_width // 8, 1) * n)]
    return pa.Array.from_buffers(arrow_type, n, buffers, null_count=n)


def typed_array(values: list, kind: str) -> Any:
    """pa.array of `values` as the column of `kind` holds them (schema.fit: what the type
    cannot hold is null, invalid UTF-8 replaced), never an exception."""
    import pyarrow as pa

    arrow_type = kind_type(kind)
    try:
        return pa.array(values, arrow_type, memory_pool=pool())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError,
            UnicodeError):  # fmt: skip
        return pa.array([fit(kind, v) for v in values], arrow_type, memory_pool=pool())

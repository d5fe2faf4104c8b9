"""Small bridges between numpy results and Arrow arrays used by the columnar kernels."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def int64_array(values: np.ndarray) -> pa.Array:
    """Wrap int64 numpy data as Arrow without ``pa.array`` (which imports pandas on first use)."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def int8_array(values: np.ndarray) -> pa.Array:
    values = np.ascontiguousarray(values, dtype=np.int8)
    return pa.Array.from_buffers(pa.int8(), len(values), [None, pa.py_buffer(values)])


def bool_array(values: np.ndarray) -> pa.Array:
    """An Arrow boolean array from a numpy bool mask."""
    packed = np.packbits(np.ascontiguousarray(values, dtype=bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(packed)])


def validity(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Numpy mask of the non-null entries."""
    if column.null_count == 0:
        return np.ones(len(column), dtype=bool)
    return np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def take_or_null(column: pa.Array | pa.ChunkedArray, index: np.ndarray) -> pa.Array:
    """``column[index]``, where an index of -1 gives null."""
    missing = index < 0
    if missing.any():
        return pc.take(column, pa.array(np.where(missing, 0, index), pa.int64(), mask=missing))
    return pc.take(column, int64_array(index))

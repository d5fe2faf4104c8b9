"""Small bridges between numpy results and Arrow arrays used by the columnar kernels."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


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

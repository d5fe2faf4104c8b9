"""Which columns of a data file are dictionary-encoded, judged from the first rows written.

A dictionary pays when values repeat: a log level, a host, a partition-like key. For
near-unique columns (ids, timestamps, free text, random measures) pyarrow still builds the
dictionary until its page passes 1 MiB, writes the pages encoded so far with it and only
then falls back to plain: the file gets bigger and both writing and reading get slower.
Apache Paimon's Java writer (parquet-mr) re-encodes such a column plain when the
dictionary does not compress; pyarrow cannot, so the choice is made up front per column
from the distinct ratio of a sample.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

# A first sample settles the near-unique columns (most of the cost of a wrong dictionary);
# a column with some repetition in it is judged again on the larger sample.
FIRST_SAMPLE_ROWS = 8_192
SAMPLE_ROWS = 65_536
# Dictionary-encode a column whose sample has at most this share of distinct values.
MAX_DISTINCT_RATIO = 0.5
# A first sample with more distinct values than this share is near-unique: no second look.
NEAR_UNIQUE_RATIO = 0.95


def dictionary_columns(sample: pa.Table) -> list[str]:
    """Names of the columns worth a dictionary, judged from the first rows of ``sample``.

    Nested columns keep pyarrow's default (their leaves are not judged here).
    """
    chosen = []
    for field, column in zip(sample.schema, sample.columns):
        if pa.types.is_nested(field.type) or len(column) == 0:
            chosen.append(field.name)
            continue
        try:
            ratio = _distinct_ratio(column, FIRST_SAMPLE_ROWS)
            if MAX_DISTINCT_RATIO < ratio < NEAR_UNIQUE_RATIO and len(column) > FIRST_SAMPLE_ROWS:
                ratio = _distinct_ratio(column, SAMPLE_ROWS)
        except pa.ArrowNotImplementedError:
            chosen.append(field.name)
            continue
        if ratio <= MAX_DISTINCT_RATIO:
            chosen.append(field.name)
    return chosen


def _distinct_ratio(column: pa.ChunkedArray, rows: int) -> float:
    head = column.slice(0, rows)
    return len(pc.unique(head)) / len(head)

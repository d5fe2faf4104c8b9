"""Dictionary encoding per column, from the distinct ratio of the first rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from paimon_core.write.encodings import SAMPLE_ROWS, dictionary_columns


def test_repeating_columns_get_a_dictionary_and_near_unique_ones_do_not() -> None:
    n = 10_000
    rng = np.random.default_rng(7)
    table = pa.table({
        "id": np.arange(n),                                          # unique: plain
        "level": pa.array(["INFO", "WARN"] * (n // 2)),              # 2 values: dictionary
        "host": pa.array([f"h{i % 200}" for i in range(n)]),         # 200 values: dictionary
        "half": np.arange(n) // 2,                                   # each value twice: ratio 0.5
        "third": (np.arange(n) * 2) // 3,                            # ratio 2/3: plain
        "latency": rng.random(n),                                    # random floats: plain
        "tags": pa.array([["a"]] * n),                               # nested: pyarrow's default
    })
    assert dictionary_columns(table) == ["level", "host", "half", "tags"]


def test_only_the_sample_is_judged_and_an_empty_file_keeps_the_default() -> None:
    repeated_then_unique = pa.table({"v": np.concatenate([np.zeros(SAMPLE_ROWS), np.arange(SAMPLE_ROWS)])})
    assert dictionary_columns(repeated_then_unique) == ["v"]
    assert dictionary_columns(pa.table({"v": pa.array([], pa.int64())})) == ["v"]


def test_a_column_repeating_only_over_more_rows_is_judged_on_the_larger_sample() -> None:
    customers = np.random.default_rng(3).integers(0, 5_000, SAMPLE_ROWS)  # ~0.6 distinct in 8k rows
    assert dictionary_columns(pa.table({"customer": customers})) == ["customer"]

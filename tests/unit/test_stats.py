"""Value stats collection per stats mode, and Java's truncation rules."""

from __future__ import annotations

import pyarrow as pa
import pytest

from paimon_core.binary_row import deserialize_with_arity
from paimon_core.options import TableOptions
from paimon_core.schema import create_schema
from paimon_core.stats import StatsCollector, truncate_max, truncate_min


def test_truncation_rules() -> None:
    assert truncate_min("abcdef", 3) == "abc"
    assert truncate_max("abcdef", 3) == "abd"
    assert truncate_max("abc", 3) == "abc"
    assert truncate_max("ab\U0010ffffzz", 3) == "ac"
    assert truncate_max("\U0010ffff" * 4, 2) is None
    assert truncate_max(b"\x01\xff\xff\x00", 3) == b"\x02"
    assert truncate_max(b"\xff\xff\xff", 2) is None
    assert truncate_max(5, 1) == 5


def _collect(options: dict[str, str], table: pa.Table) -> tuple:
    schema = create_schema(table.schema, options=options)
    collector = StatsCollector(schema.fields, TableOptions.from_map(options))
    for batch in table.to_batches(max_chunksize=2):
        collector.update(batch)
    stats, cols = collector.result()
    fields = schema.fields if cols is None else [schema.field(c) for c in cols]
    types = [f.type for f in fields]
    return (cols, deserialize_with_arity(stats.min_values, types),
            deserialize_with_arity(stats.max_values, types), stats.null_counts)


DATA = pa.table({"id": [3, 1, None, 7], "s": ["zebra-long-value-x", "apple", "mango", None],
                 "l": [[1], None, [2, 3], []]})


def test_full_mode_over_chunks() -> None:
    cols, low, high, nulls = _collect({"metadata.stats-mode": "full"}, DATA)
    assert cols is None
    assert low == (1, "apple", None) and high == (7, "zebra-long-value-x", None)
    assert nulls == (1, 1, 1)


def test_default_truncate16() -> None:
    _, _, high, _ = _collect({}, DATA)
    assert high[1] == "zebra-long-valuf"  # 16 chars, last one incremented


def test_counts_and_none_modes_dense() -> None:
    assert _collect({"metadata.stats-mode": "counts"}, DATA) == (None, (None,) * 3, (None,) * 3, (1, 1, 1))
    cols, low, high, nulls = _collect({"metadata.stats-mode": "none"}, DATA)
    assert (cols, low, high, nulls) == ((), (), (), ())


def test_per_field_modes_list_the_covered_columns() -> None:
    cols, low, high, nulls = _collect({"metadata.stats-mode": "none", "fields.s.stats-mode": "truncate(2)"}, DATA)
    assert cols == ("s",) and low == ("ap",) and high == ("zf",) and nulls == (1,)


def test_sparse_store_keeps_a_slot_per_column() -> None:
    cols, low, _, nulls = _collect({"metadata.stats-mode": "none", "fields.id.stats-mode": "full",
                                    "metadata.stats-dense-store": "false"}, DATA)
    assert cols is None and low == (1, None, None) and nulls == (1, None, None)


@pytest.mark.parametrize("keep", ["1", "2"])
def test_keep_first_n_columns(keep: str) -> None:
    cols, *_ = _collect({"metadata.stats-keep-first-n-columns": keep}, DATA)
    assert cols == ("id", "s")[: int(keep)]

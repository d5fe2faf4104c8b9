"""One measured step of the primary-key benchmark for pypaimon 2.1.0, in a fresh process.

    .venv-oracle/bin/python bench_pk_oracle.py STEP --input DATA_DIR --target WAREHOUSE [--upserts N]

Run by pk_bench.py in .venv-oracle (pyarrow 19); must not import paimon_core. The pypaimon calls
are bench_oracle.py's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bench_oracle as oracle
import bench_pk_common as pk
import pyarrow as pa
from pypaimon import Schema


class PyPaimon:
    def create(self, target: Path) -> Any:
        catalog = oracle.catalog(target)
        catalog.create_database("bench", True)
        schema = Schema.from_pyarrow_schema(pk.SCHEMA, primary_keys=[pk.KEY], options={"bucket": pk.BUCKETS})
        catalog.create_table(pk.TABLE, schema, False)
        return catalog.get_table(pk.TABLE)

    def open(self, target: Path) -> Any:
        return oracle.catalog(target).get_table(pk.TABLE)

    def write(self, table: Any, data: pa.Table) -> None:
        oracle.write_arrow(table, data)

    def upsert(self, table: Any, data: pa.Table) -> None:
        oracle.write_arrow(table, data)

    def read(self, table: Any, key_range: tuple[int, int] | None) -> pa.Table:
        if key_range is None:
            return oracle.read_arrow(table)
        low, high = key_range
        return oracle.read_arrow(table, lambda predicates: predicates.and_predicates([
            predicates.greater_or_equal(pk.KEY, low), predicates.less_than(pk.KEY, high)]))

    def committed_rows(self, table: Any) -> int:
        snapshot = table.snapshot_manager().get_latest_snapshot()
        return int(snapshot.delta_record_count) if snapshot is not None else 0


if __name__ == "__main__":
    pk.run_pk_step(__doc__, PyPaimon())

"""One measured step of the primary-key benchmark for paimon_core (ours), in a fresh process.

    .venv/bin/python bench_pk_ours.py STEP --input DATA_DIR --target WAREHOUSE [--upserts N] [--profile OUT]

Run by pk_bench.py; STEP is write, upsert, read, range_read or build (see bench_pk_common.py).
"""

from __future__ import annotations

import importlib
from pathlib import Path

import bench_pk_common as pk
import pyarrow as pa

import paimon_core

# Imported here, outside the timer, as bench_ours.py explains: paimon_core otherwise pulls in
# pyarrow.dataset (and pandas) on its first filtered read or pa.array() call inside the step.
importlib.import_module("pyarrow.dataset")


class Ours:
    def create(self, target: Path) -> paimon_core.Table:
        catalog = paimon_core.Catalog(str(target))
        catalog.create_database("bench", exist_ok=True)
        return catalog.create_table(pk.TABLE, schema=pk.SCHEMA, primary_keys=[pk.KEY],
                                    options={"bucket": pk.BUCKETS})

    def open(self, target: Path) -> paimon_core.Table:
        return paimon_core.Catalog(str(target)).get_table(pk.TABLE)

    def write(self, table: paimon_core.Table, data: pa.Table) -> None:
        table.write(data)

    def upsert(self, table: paimon_core.Table, data: pa.Table) -> None:
        table.write(data)

    def read(self, table: paimon_core.Table, key_range: tuple[int, int] | None) -> pa.Table:
        if key_range is None:
            return table.read()
        low, high = key_range
        return table.read(filter=[(pk.KEY, ">=", low), (pk.KEY, "<", high)])

    def committed_rows(self, table: paimon_core.Table) -> int:
        snapshot = table.latest_snapshot()
        return snapshot.delta_record_count if snapshot is not None else 0


if __name__ == "__main__":
    pk.run_pk_step(__doc__, Ours())

"""One measured step of the primary-key benchmark for delta-rs (``deltalake``), in a fresh process.

    .venv-bench/bin/python bench_pk_delta.py STEP --input DATA_DIR --target TABLE_DIR [--upserts N]

Run by pk_bench.py in .venv-bench, which it creates (deltalake, pyarrow, numpy). The initial write
is ``write_deltalake``; an upsert is a MERGE on ``id`` (update all matched, insert the rest).
Loading the Delta log (``DeltaTable(path)``) is inside the timer, like scan planning for Paimon.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import bench_pk_common as pk
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

# to_pyarrow_table() imports pyarrow.dataset on first use: keep that import outside the timer.
importlib.import_module("pyarrow.dataset")


class Delta:
    def create(self, target: Path) -> str:
        return str(target)  # write_deltalake creates the table

    def open(self, target: Path) -> str:
        return str(target)

    def write(self, path: str, data: pa.Table) -> None:
        write_deltalake(path, data)

    def upsert(self, path: str, data: pa.Table) -> None:
        (DeltaTable(path).merge(source=data, predicate=f"t.{pk.KEY} = s.{pk.KEY}", source_alias="s",
                                target_alias="t")
         .when_matched_update_all().when_not_matched_insert_all().execute())

    def read(self, path: str, key_range: tuple[int, int] | None) -> pa.Table:
        if key_range is None:
            return DeltaTable(path).to_pyarrow_table()
        low, high = key_range
        return DeltaTable(path).to_pyarrow_table(filters=[(pk.KEY, ">=", low), (pk.KEY, "<", high)])

    def committed_rows(self, path: str) -> int:
        metrics = DeltaTable(path).history(1)[0]["operationMetrics"]
        if "num_added_rows" in metrics:  # WRITE
            return int(metrics["num_added_rows"])
        return int(metrics["num_target_rows_inserted"]) + int(metrics["num_target_rows_updated"])  # MERGE


if __name__ == "__main__":
    pk.run_pk_step(__doc__, Delta())

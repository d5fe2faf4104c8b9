"""One measured step of the compaction benchmark for paimon_core (ours), in a fresh process.

    .venv/bin/python bench_compaction_ours.py STEP --scenario pk|append --input DATA_DIR --target WAREHOUSE
        [--state before|after] [--profile OUT]

Run by compaction_bench.py; STEP is build, compact or read (see bench_compaction_common.py). Tables
are built write-only (writers never compact), so every commit stays a level-0 file until the
measured ``Table.compact(full=True)``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path

import bench_compaction_common as cc
import pyarrow as pa

import paimon_core
from paimon_core.compaction.compactor import CompactionResult

# Imported here, outside the timer, as bench_ours.py explains: paimon_core otherwise pulls in
# pyarrow.dataset (and pandas) on its first filtered read or pa.array() call inside the step.
importlib.import_module("pyarrow.dataset")

OPTIONS = {
    "pk": {"bucket": cc.PK_BUCKETS, "write-only": "true"},
    "append": {"bucket": "-1", "write-only": "true"},
}


def _table_name(scenario: str) -> str:
    return cc.PK_TABLE if scenario == "pk" else cc.APPEND_TABLE


class Ours:
    def build(self, target: Path, scenario: str, commits: Iterator[pa.Table]) -> dict[str, int]:
        catalog = paimon_core.Catalog(str(target))
        catalog.create_database("bench", exist_ok=True)
        keys = [cc.PK_KEY] if scenario == "pk" else []
        table = catalog.create_table(_table_name(scenario), schema=cc.schema_of(scenario), primary_keys=keys,
                                     options=OPTIONS[scenario])
        for rows in commits:
            table.write(rows)
        state = table.lsm_state()
        files = table.files()
        return {"files": len(files), "rows": sum(f.row_count for f in files), "bytes": sum(f.file_size for f in files),
                "max_level0_files": state.max_level0_files, "max_sorted_runs": state.max_sorted_runs}

    def open(self, target: Path, scenario: str) -> paimon_core.Table:
        return paimon_core.Catalog(str(target)).get_table(_table_name(scenario))

    def compact(self, table: paimon_core.Table, scenario: str) -> CompactionResult:
        return table.compact(full=True)

    def compacted(self, table: paimon_core.Table, scenario: str, result: CompactionResult) -> dict[str, int]:
        state = table.lsm_state()
        return {"rows_in": result.rows_in, "rows_out": result.rows_out, "files_in": result.files_in,
                "files_out": result.files_out, "bytes_in": result.bytes_in, "bytes_out": result.bytes_out,
                "max_level0_files": state.max_level0_files, "max_sorted_runs": state.max_sorted_runs}

    def read(self, table: paimon_core.Table, scenario: str, state: str) -> pa.Table:
        return table.read()

    def full_read_check(self, scenario: str) -> bool:
        return True


if __name__ == "__main__":
    cc.run_compaction_step(__doc__, Ours())

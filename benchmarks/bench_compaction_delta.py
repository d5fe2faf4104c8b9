"""One measured step of the compaction benchmark for delta-rs (``deltalake``), in a fresh process.

    .venv-bench/bin/python bench_compaction_delta.py STEP --scenario pk|append --input DATA_DIR --target DIR
        [--state before|after] [--profile OUT]

Run by compaction_bench.py in .venv-bench. A table is built from the same commits as the other
engines, one ``write_deltalake(mode="append")`` each (unpartitioned; Delta has no primary key, so
the pk table keeps every version of every key). Compaction is ``DeltaTable(path).optimize.compact()``
with its defaults (bin-packing into files of up to 100 MB, zstd level 4, one task per CPU); loading
the Delta log is inside the timer, like scan planning for Paimon.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bench_compaction_common as cc
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

# to_pyarrow_table() imports pyarrow.dataset on first use: keep that import outside the timer.
importlib.import_module("pyarrow.dataset")


def _add_actions(table: DeltaTable) -> pa.Table:
    return pa.table(table.get_add_actions(flatten=True))


class Delta:
    def build(self, target: Path, scenario: str, commits: Iterator[pa.Table]) -> dict[str, int]:
        for rows in commits:
            write_deltalake(str(target), rows, mode="append")
        actions = _add_actions(DeltaTable(str(target)))
        return {"files": actions.num_rows, "rows": int(pc.sum(actions.column("num_records")).as_py()),
                "bytes": int(pc.sum(actions.column("size_bytes")).as_py())}

    def open(self, target: Path, scenario: str) -> str:
        return str(target)

    def compact(self, path: str, scenario: str) -> dict[str, Any]:
        return DeltaTable(path).optimize.compact()

    def compacted(self, path: str, scenario: str, metrics: dict[str, Any]) -> dict[str, int]:
        table = DeltaTable(path)
        before = _add_actions(DeltaTable(path, version=table.version() - 1))
        after = _add_actions(table)
        added, removed = json.loads(metrics["filesAdded"]), json.loads(metrics["filesRemoved"])
        return {"rows_in": int(pc.sum(before.column("num_records")).as_py()),
                "rows_out": int(pc.sum(after.column("num_records")).as_py()),
                "files_in": int(metrics["numFilesRemoved"]), "files_out": int(metrics["numFilesAdded"]),
                "bytes_in": int(removed["totalSize"]), "bytes_out": int(added["totalSize"])}

    def read(self, path: str, scenario: str, state: str) -> pa.Table:
        return DeltaTable(path).to_pyarrow_table()

    def full_read_check(self, scenario: str) -> bool:
        return scenario == "append"  # the pk table holds every version: compare rows and key sum only


if __name__ == "__main__":
    cc.run_compaction_step(__doc__, Delta())

"""One measured step of pypaimon 2.1.0 in a fresh process (runs in .venv-oracle; see append_bench.py).

    .venv-oracle/bin/python bench_oracle.py STEP --input DATA.arrow --target WAREHOUSE [--profile OUT]

This file must not import paimon_core.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench_common as bc
import pyarrow as pa
from pypaimon import CatalogFactory, Schema


def _catalog(target: Path) -> Any:
    return CatalogFactory.create({"warehouse": str(target)})


def _committed_rows(table: Any) -> dict[str, int]:
    splits = table.new_read_builder().new_scan().plan().splits()
    return {"rows": sum(split.row_count for split in splits)}


def write(args: argparse.Namespace) -> None:
    data = bc.load_mapped(args.input)
    catalog = _catalog(args.target)
    catalog.create_database("bench", True)
    schema = Schema.from_pyarrow_schema(bc.SCHEMA, partition_keys=["dt"], options={"bucket": "-1"})
    catalog.create_table(bc.TABLE, schema, False)
    table = catalog.get_table(bc.TABLE)

    def write_and_commit() -> None:
        builder = table.new_batch_write_builder()
        writer, commit = builder.new_write(), builder.new_commit()
        writer.write_arrow(data)
        commit.commit(writer.prepare_commit())
        writer.close()
        commit.close()

    _, timing = bc.measure(write_and_commit, args.profile)
    bc.report(timing, _committed_rows(catalog.get_table(bc.TABLE)))


def _read(table: Any, with_filter: bool) -> pa.Table:
    builder = table.new_read_builder()
    if with_filter:
        predicates = builder.new_predicate_builder()
        builder = builder.with_filter(predicates.and_predicates([
            predicates.equal("dt", bc.FILTER_DAY), predicates.equal("level", bc.FILTER_LEVEL)]))
    return builder.new_read().to_arrow(builder.new_scan().plan().splits())


def _read_step(with_filter: bool) -> Callable[[argparse.Namespace], None]:
    def step(args: argparse.Namespace) -> None:
        table = _catalog(args.target).get_table(bc.TABLE)
        bc.report_read(lambda: _read(table, with_filter), args.profile)
    return step


if __name__ == "__main__":
    bc.run_step(__doc__, {"write": write, "read": _read_step(False), "filtered_read": _read_step(True)})

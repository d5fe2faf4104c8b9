"""One measured step of pypaimon 2.1.0 in a fresh process (runs in .venv-oracle; see append_bench.py).

    .venv-oracle/bin/python bench_oracle.py STEP --input DATA.arrow --target WAREHOUSE [--profile OUT]

Also holds the pypaimon calls that bench_pk_oracle.py shares: :func:`catalog`, :func:`write_arrow`
and :func:`read_arrow`. This file must not import paimon_core.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench_common as bc
import pyarrow as pa
from pypaimon import CatalogFactory, Schema


def catalog(target: Path) -> Any:
    """The filesystem catalog of the warehouse ``target``."""
    return CatalogFactory.create({"warehouse": str(target)})


def write_arrow(table: Any, data: pa.Table) -> None:
    """Write ``data`` as one batch commit."""
    builder = table.new_batch_write_builder()
    writer, commit = builder.new_write(), builder.new_commit()
    writer.write_arrow(data)
    commit.commit(writer.prepare_commit())
    writer.close()
    commit.close()


def read_arrow(table: Any, predicate: Callable[[Any], Any] | None = None) -> pa.Table:
    """Plan and read the table, filtered by ``predicate(predicate_builder)`` if given."""
    builder = table.new_read_builder()
    if predicate is not None:
        builder = builder.with_filter(predicate(builder.new_predicate_builder()))
    return builder.new_read().to_arrow(builder.new_scan().plan().splits())


def _committed_rows(table: Any) -> dict[str, int]:
    splits = table.new_read_builder().new_scan().plan().splits()
    return {"rows": sum(split.row_count for split in splits)}


def write(args: argparse.Namespace) -> None:
    data = bc.load_mapped(args.input)
    warehouse = catalog(args.target)
    warehouse.create_database("bench", True)
    schema = Schema.from_pyarrow_schema(bc.SCHEMA, partition_keys=["dt"], options={"bucket": "-1"})
    warehouse.create_table(bc.TABLE, schema, False)
    table = warehouse.get_table(bc.TABLE)
    _, timing = bc.measure(lambda: write_arrow(table, data), args.profile)
    bc.report(timing, _committed_rows(warehouse.get_table(bc.TABLE)))


def _filter(predicates: Any) -> Any:
    """``dt = FILTER_DAY AND level = FILTER_LEVEL``."""
    return predicates.and_predicates([predicates.equal("dt", bc.FILTER_DAY),
                                      predicates.equal("level", bc.FILTER_LEVEL)])


def _read_step(with_filter: bool) -> Callable[[argparse.Namespace], None]:
    def step(args: argparse.Namespace) -> None:
        table = catalog(args.target).get_table(bc.TABLE)
        bc.report_read(lambda: read_arrow(table, _filter if with_filter else None), args.profile)
    return step


if __name__ == "__main__":
    bc.run_step(__doc__, {"write": write, "read": _read_step(False), "filtered_read": _read_step(True)})

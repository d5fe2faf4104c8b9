"""One measured step of the primary-key benchmark for pypaimon 2.1.0, in a fresh process.

    .venv-oracle/bin/python bench_pk_oracle.py STEP --input DATA_DIR --target WAREHOUSE [--upserts N]

Run by pk_bench.py in .venv-oracle (pyarrow 19); must not import paimon_core.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bench_pk_common as pk
import pyarrow as pa
from pypaimon import CatalogFactory, Schema


class PyPaimon:
    def create(self, target: Path) -> Any:
        catalog = CatalogFactory.create({"warehouse": str(target)})
        catalog.create_database("bench", True)
        schema = Schema.from_pyarrow_schema(pk.SCHEMA, primary_keys=[pk.KEY], options={"bucket": pk.BUCKETS})
        catalog.create_table(pk.TABLE, schema, False)
        return catalog.get_table(pk.TABLE)

    def open(self, target: Path) -> Any:
        return CatalogFactory.create({"warehouse": str(target)}).get_table(pk.TABLE)

    def write(self, table: Any, data: pa.Table) -> None:
        builder = table.new_batch_write_builder()
        writer, commit = builder.new_write(), builder.new_commit()
        writer.write_arrow(data)
        commit.commit(writer.prepare_commit())
        writer.close()
        commit.close()

    def upsert(self, table: Any, data: pa.Table) -> None:
        self.write(table, data)

    def read(self, table: Any, key_range: tuple[int, int] | None) -> pa.Table:
        builder = table.new_read_builder()
        if key_range is not None:
            predicates = builder.new_predicate_builder()
            builder = builder.with_filter(predicates.and_predicates([
                predicates.greater_or_equal(pk.KEY, key_range[0]), predicates.less_than(pk.KEY, key_range[1])]))
        return builder.new_read().to_arrow(builder.new_scan().plan().splits())

    def committed_rows(self, table: Any) -> int:
        snapshot = table.snapshot_manager().get_latest_snapshot()
        return int(snapshot.delta_record_count) if snapshot is not None else 0


if __name__ == "__main__":
    pk.run_pk_step(__doc__, PyPaimon())

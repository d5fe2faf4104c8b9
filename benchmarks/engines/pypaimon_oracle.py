"""pypaimon 2.1.0: its side of the append and primary-key suites, run in ``.venv-oracle``.

That virtualenv has pyarrow 19 and no paimon_core, so this module must not import paimon_core
(nor anything that does). Tables are written by a batch write builder, one commit each, and read
by a read builder from ``new_read_builder()`` to ``to_arrow(...)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pypaimon import CatalogFactory, Schema

from benchmarks.suites import append, pk

Predicate = Callable[[Any], Any]  # predicate builder -> predicate


def catalog(target: Path) -> Any:
    """The filesystem catalog of the warehouse ``target``."""
    return CatalogFactory.create({"warehouse": str(target)})


def create_table(target: Path, name: str, schema: Any) -> Any:
    warehouse = catalog(target)
    warehouse.create_database("bench", True)
    warehouse.create_table(name, schema, False)
    return warehouse.get_table(name)


def write_arrow(table: Any, rows: pa.Table) -> None:
    """Write ``rows`` as one batch commit."""
    builder = table.new_batch_write_builder()
    writer, commit = builder.new_write(), builder.new_commit()
    writer.write_arrow(rows)
    commit.commit(writer.prepare_commit())
    writer.close()
    commit.close()


def read_arrow(table: Any, predicate: Predicate | None = None) -> pa.Table:
    """Plan and read the table, filtered by ``predicate(predicate_builder)`` if given."""
    builder = table.new_read_builder()
    if predicate is not None:
        builder = builder.with_filter(predicate(builder.new_predicate_builder()))
    return builder.new_read().to_arrow(builder.new_scan().plan().splits())


class Append:
    """Append suite: ``bucket=-1``, partitioned by ``dt``."""

    def create(self, target: Path, buffer: str | None) -> Any:
        schema = Schema.from_pyarrow_schema(append.SCHEMA, partition_keys=["dt"], options={"bucket": "-1"})
        return create_table(target, append.TABLE, schema)

    def write(self, table: Any, rows: pa.Table) -> None:
        write_arrow(table, rows)

    def stream(self, table: Any, batches: Iterator[pa.RecordBatch]) -> None:
        raise SystemExit("the streaming-ingest step is ours only")

    def committed_rows(self, target: Path) -> int:
        splits = catalog(target).get_table(append.TABLE).new_read_builder().new_scan().plan().splits()
        return sum(split.row_count for split in splits)

    def read(self, target: Path, filtered: bool) -> Callable[[], pa.Table]:
        table = catalog(target).get_table(append.TABLE)

        def condition(predicates: Any) -> Any:
            return predicates.and_predicates([predicates.equal("dt", append.FILTER_DAY),
                                              predicates.equal("level", append.FILTER_LEVEL)])

        return lambda: read_arrow(table, condition if filtered else None)


class Pk:
    """Primary-key suite: the same table definition as ours (key ``id``, 4 buckets)."""

    def create(self, target: Path) -> Any:
        schema = Schema.from_pyarrow_schema(pk.SCHEMA, primary_keys=[pk.KEY], options={"bucket": pk.BUCKETS})
        return create_table(target, pk.TABLE, schema)

    def open(self, target: Path) -> Any:
        return catalog(target).get_table(pk.TABLE)

    def write(self, table: Any, rows: pa.Table) -> None:
        write_arrow(table, rows)

    def upsert(self, table: Any, rows: pa.Table) -> None:
        write_arrow(table, rows)

    def read(self, table: Any, key_range: tuple[int, int] | None) -> pa.Table:
        if key_range is None:
            return read_arrow(table)
        low, high = key_range
        return read_arrow(table, lambda predicates: predicates.and_predicates([
            predicates.greater_or_equal(pk.KEY, low), predicates.less_than(pk.KEY, high)]))

    def committed_rows(self, table: Any) -> int:
        snapshot = table.snapshot_manager().get_latest_snapshot()
        return int(snapshot.delta_record_count) if snapshot is not None else 0


SUITES: dict[str, Any] = {"append": Append(), "pk": Pk()}

"""Raw pyarrow Parquet, no table format: the reference a table format on pyarrow is compared with.

* append: a hive-partitioned dataset (``write_dataset``, zstd at Arrow's default level 1, row groups
  of at least 128k rows), read back by ``pq.read_table`` with ``dt`` as a string column.
* pk: the base rows and every upsert batch are plain Parquet files in arrival order, with an int64
  ``_seq`` column numbering rows across files; a read keeps each key's newest row
  (:func:`newest_per_key`).
* compaction: a folder of run files (pk: one per commit, sorted by key, with ``_seq``; append: one
  per commit); a compaction reads them by one dataset scan, dedupes (pk) and writes one file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from benchmarks.suites import append, compaction, pk

SEQ = "_seq"
COMPRESSION = "zstd"  # at Arrow's default level (1), like paimon_core's default
PARQUET = ds.ParquetFileFormat()
PARQUET_OPTIONS = PARQUET.make_write_options(compression=COMPRESSION)
# Without a minimum, write_dataset writes one tiny row group per partition per 64k-row input
# batch, which makes its reads about 3x slower.
MIN_ROWS_PER_GROUP = 1 << 17
# dt is read back as a plain string column, as the Paimon engines return it.
PARTITIONING = ds.partitioning(pa.schema([("dt", pa.string())]), flavor="hive")


def newest_per_key(rows: pa.Table, key: str) -> pa.Table:
    """The newest version (highest ``_seq``) of every key, in key order: ``pc.sort_indices`` by
    (key, seq), a boundary mask on the sorted keys, one ``take``."""
    order = pc.sort_indices(rows, sort_keys=[(key, "ascending"), (SEQ, "ascending")])
    keys = pc.take(rows.column(key), order).to_numpy()
    last = np.ones(len(keys), dtype=bool)
    last[:-1] = keys[1:] != keys[:-1]
    return rows.take(order.filter(pa.array(last)))


def with_sequence(rows: pa.Table, first: int) -> pa.Table:
    """``rows`` with an int64 ``_seq`` column numbering them from ``first``."""
    return rows.append_column(SEQ, pa.array(np.arange(first, first + rows.num_rows, dtype=np.int64)))


def scan(files: list[Path], condition: Any = None) -> pa.Table:
    """The files' rows in file order, by one (multi-threaded) dataset scan."""
    return ds.dataset([str(f) for f in files], format="parquet").to_table(filter=condition)


class Append:
    def create(self, target: Path, buffer: str | None) -> Path:
        return target  # write_dataset creates the directory

    def write(self, target: Path, rows: pa.Table) -> None:
        ds.write_dataset(rows, str(target), format=PARQUET, file_options=PARQUET_OPTIONS,
                         partitioning=["dt"], partitioning_flavor="hive",
                         min_rows_per_group=MIN_ROWS_PER_GROUP, existing_data_behavior="error")

    def stream(self, target: Path, batches: Iterator[pa.RecordBatch]) -> None:
        raise SystemExit("the streaming-ingest step is ours only")

    def committed_rows(self, target: Path) -> int:
        return int(ds.dataset(str(target), format=PARQUET, partitioning=PARTITIONING).count_rows())

    def read(self, target: Path, filtered: bool) -> Callable[[], pa.Table]:
        if not filtered:
            return lambda: pq.read_table(str(target), partitioning=PARTITIONING)
        condition = (ds.field("dt") == append.FILTER_DAY) & (ds.field("level") == append.FILTER_LEVEL)
        return lambda: pq.read_table(str(target), partitioning=PARTITIONING, filters=condition)


class Pk:
    """Reads only: the base and the upsert batches as Parquet files, deduplicated on read."""

    def create(self, target: Path) -> Path:
        target.mkdir(parents=True, exist_ok=False)
        return target

    def open(self, target: Path) -> Path:
        return target

    @staticmethod
    def _files(directory: Path) -> list[Path]:
        return sorted(directory.glob("part-*.parquet"))

    def write(self, directory: Path, rows: pa.Table) -> None:
        files = self._files(directory)
        first = sum(pq.read_metadata(f).num_rows for f in files)
        pq.write_table(with_sequence(rows, first), directory / f"part-{len(files):03d}.parquet",
                       compression=COMPRESSION)

    def upsert(self, directory: Path, rows: pa.Table) -> None:
        self.write(directory, rows)

    def layout_write(self, directory: Path, rows: pa.Table) -> int:
        """What a fixed-bucket primary-key write does physically, without a table format: a
        bucket per row from a hash of its key, each bucket's rows sorted by key, and one zstd
        file per bucket holding the key copy, sequence number and row kind Paimon stores next
        to the values (dictionaries only where values repeat, buckets encoded on two threads).
        Returns the rows written."""
        keys = rows.column(pk.KEY).to_numpy()
        mixed = keys.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing
        buckets = int(pk.BUCKETS)
        bucket = (mixed % np.uint64(buckets)).astype(np.int64)
        order = np.lexsort((keys, bucket))
        bounds = np.searchsorted(bucket[order], np.arange(buckets + 1))

        def write_bucket(index: int) -> int:
            part = rows.take(pa.array(order[bounds[index]:bounds[index + 1]]))
            n = part.num_rows
            stored = pa.table([part.column(pk.KEY), pa.array(np.arange(n, dtype=np.int64)),
                               pa.array(np.zeros(n, dtype=np.int8)), *part.columns],
                              names=[f"_KEY_{pk.KEY}", "_SEQUENCE_NUMBER", "_VALUE_KIND", *part.column_names])
            pq.write_table(stored, directory / f"bucket-{index}.parquet", compression=COMPRESSION,
                           use_dictionary=["_VALUE_KIND"])
            return n

        with ThreadPoolExecutor(2) as pool:
            return sum(pool.map(write_bucket, range(buckets)))

    def read(self, directory: Path, key_range: tuple[int, int] | None) -> pa.Table:
        condition = None
        if key_range is not None:
            condition = (ds.field(pk.KEY) >= key_range[0]) & (ds.field(pk.KEY) < key_range[1])
        return newest_per_key(scan(self._files(directory), condition), pk.KEY).drop_columns([SEQ])

    def committed_rows(self, directory: Path) -> int:
        return int(pq.read_metadata(self._files(directory)[-1]).num_rows)


class Compaction:
    """The runs in ``runs/``, the compacted file in ``compacted/part-0.parquet``. The runs stay after
    a compaction, as Paimon and Delta keep replaced files until snapshots expire or a vacuum."""

    @staticmethod
    def _runs(directory: Path) -> list[Path]:
        return sorted((directory / "runs").glob("*.parquet"))

    @staticmethod
    def _output(directory: Path) -> list[Path]:
        return sorted((directory / "compacted").glob("*.parquet"))

    def build(self, target: Path, scenario: str, commits: Iterator[pa.Table]) -> dict[str, int]:
        runs = target / "runs"
        runs.mkdir(parents=True)
        first = 0
        for index, rows in enumerate(commits):
            if scenario == "pk":
                run = with_sequence(rows, first)
                run = run.take(pc.sort_indices(run.column(compaction.PK_KEY)))
                pq.write_table(run, runs / f"run-{index:03d}.parquet", compression=COMPRESSION)
            else:
                pq.write_table(rows, runs / f"part-{index:04d}.parquet", compression=COMPRESSION)
            first += rows.num_rows
        files = self._runs(target)
        return {"files": len(files), "rows": first, "bytes": sum(f.stat().st_size for f in files)}

    def open(self, target: Path, scenario: str) -> Path:
        return target

    def compact(self, directory: Path, scenario: str) -> None:
        rows = scan(self._runs(directory))
        if scenario == "pk":
            rows = newest_per_key(rows, compaction.PK_KEY)
        out = directory / "compacted"
        out.mkdir()
        pq.write_table(rows, out / "part-0.parquet", compression=COMPRESSION)

    def compacted(self, directory: Path, scenario: str, result: None) -> dict[str, int]:
        runs, output = self._runs(directory), self._output(directory)
        return {"rows_in": sum(pq.read_metadata(f).num_rows for f in runs),
                "rows_out": sum(pq.read_metadata(f).num_rows for f in output),
                "files_in": len(runs), "files_out": len(output),
                "bytes_in": sum(f.stat().st_size for f in runs), "bytes_out": sum(f.stat().st_size for f in output)}

    def read(self, directory: Path, scenario: str, state: str) -> pa.Table:
        """After compaction ``pq.read_table`` of the data columns; before it, the runs (pk: sorted
        and deduplicated, without the write)."""
        columns = compaction.schema_of(scenario).names
        if state == "after":
            return pa.concat_tables([pq.read_table(f, columns=columns) for f in self._output(directory)])
        rows = scan(self._runs(directory))
        return (newest_per_key(rows, compaction.PK_KEY) if scenario == "pk" else rows).select(columns)

    def full_read_check(self, scenario: str) -> bool:
        return True


SUITES: dict[str, Any] = {"append": Append(), "pk": Pk(), "compaction": Compaction()}

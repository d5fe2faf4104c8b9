"""The raw-pyarrow reference of the primary-key benchmark: Parquet files plus sort + dedupe.

    .venv/bin/python bench_pk_pyarrow.py STEP --input DATA_DIR --target DIR [--profile OUT]

No table format: the base rows and every upsert batch are plain Parquet files (zstd, Arrow's
default level, as paimon_core writes) in arrival order, with an int64 sequence column numbering the
rows across files. A read loads all files and keeps the newest version of each key:
``pc.sort_indices`` by (id, seq), a boundary mask on the sorted keys, one ``take``.
"""

from __future__ import annotations

from pathlib import Path

import bench_pk_common as pk
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

SEQ = "_seq"


class RawPyarrow:
    def create(self, target: Path) -> Path:
        target.mkdir(parents=True, exist_ok=False)
        return target

    def open(self, target: Path) -> Path:
        return target

    def write(self, directory: Path, data: pa.Table) -> None:
        files = _files(directory)
        first = sum(pq.read_metadata(f).num_rows for f in files)
        sequence = pa.array(np.arange(first, first + data.num_rows, dtype=np.int64))
        pq.write_table(data.append_column(SEQ, sequence), directory / f"part-{len(files):03d}.parquet",
                       compression="zstd")

    def upsert(self, directory: Path, data: pa.Table) -> None:
        self.write(directory, data)

    def read(self, directory: Path, key_range: tuple[int, int] | None) -> pa.Table:
        condition = None
        if key_range is not None:
            condition = (ds.field(pk.KEY) >= key_range[0]) & (ds.field(pk.KEY) < key_range[1])
        files = [str(f) for f in _files(directory)]
        return newest_per_key(ds.dataset(files, format="parquet").to_table(filter=condition))

    def committed_rows(self, directory: Path) -> int:
        return pq.read_metadata(_files(directory)[-1]).num_rows


def _files(directory: Path) -> list[Path]:
    return sorted(directory.glob("part-*.parquet"))


def newest_per_key(table: pa.Table) -> pa.Table:
    """The newest version (highest sequence) of every key, in key order."""
    order = pc.sort_indices(table, sort_keys=[(pk.KEY, "ascending"), (SEQ, "ascending")])
    keys = pc.take(table[pk.KEY], order).to_numpy()
    last = np.ones(len(keys), dtype=bool)
    last[:-1] = keys[1:] != keys[:-1]
    return table.take(order.filter(pa.array(last))).drop_columns([SEQ])


if __name__ == "__main__":
    pk.run_pk_step(__doc__, RawPyarrow())

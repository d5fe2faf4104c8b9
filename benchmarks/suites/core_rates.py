"""What one core does, measured by the scale-out suite: the inputs of its 1 TB/day model.

In a process of its own pinned to one core with one Arrow thread (CPU and I/O pools), on one
partition of the scale-out suite's landed files: writing a primary-key table of 4 buckets in one
commit (bucket routing, sort, merge, Parquet + zstd), a full compaction of the same rows written
in four commits, decoding the landed Parquet files, and committing what N writers prepared (N
one-file messages of an append table) for a few N: the commit's seconds per file handed over, the
message bytes and the new manifest bytes per file.
"""

from __future__ import annotations

import os
import shutil
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import paimon_core as pc

MIB = 1024 * 1024
COMMIT_FILES = (64, 1_024, 4_096)
QUICK_COMMIT_FILES = (8, 64)


def _one_core() -> None:
    """The worker's initializer: core 0 only, one Arrow thread, before anything reads or writes."""
    os.sched_setaffinity(0, {0})
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)


def measure(landing: Path, day: str, work: Path, *, commit_files: tuple[int, ...] = COMMIT_FILES) -> dict[str, Any]:
    """Every rate, measured in a fresh spawned process pinned to one core."""
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn"), initializer=_one_core) as pool:
        return pool.submit(_measure, landing, day, work, commit_files).result()


def _measure(landing: Path, day: str, work: Path, commit_files: tuple[int, ...]) -> dict[str, Any]:
    shutil.rmtree(work, ignore_errors=True)
    catalog = pc.Catalog(str(work))
    catalog.create_database("rates")
    files = sorted((landing / f"dt={day}").glob("*.parquet"))
    for path in files:  # the OS page cache holds them for every measurement alike
        path.read_bytes()
    started = time.perf_counter()
    parts = [pq.read_table(path) for path in files]
    decode_s = time.perf_counter() - started
    parts = [p.append_column("dt", pa.array([day] * p.num_rows)) for p in parts]
    rows = pa.concat_tables(parts)
    mib = rows.nbytes / MIB
    options = {"bucket": "4", "write-only": "true"}

    written = catalog.create_table("rates.write", schema=rows.schema, partition_keys=["dt"],
                                   primary_keys=["dt", "id"], options=options)
    started = time.perf_counter()
    written.write(rows)
    write_s = time.perf_counter() - started

    compacted = catalog.create_table("rates.compact", schema=rows.schema, partition_keys=["dt"],
                                     primary_keys=["dt", "id"], options=options)
    for part in parts:
        compacted.write(part)
    started = time.perf_counter()
    compacted.compact(full=True)
    compaction_s = time.perf_counter() - started
    keys = len(set(rows.column("id").to_pylist()))
    merged = (written.read(columns=["id"]).num_rows, compacted.read(columns=["id"]).num_rows)
    if merged != (keys, keys):
        raise AssertionError(f"{keys} keys written, the tables read {merged} rows")

    return {
        "rows": rows.num_rows, "arrow_mib": round(mib, 1), "bytes_per_row": round(rows.nbytes / rows.num_rows, 1),
        "parquet_decode_mib_s": round(sum(p.nbytes for p in parts) / MIB / decode_s, 1),
        "pk_write_s": round(write_s, 3), "pk_write_rows_s": round(rows.num_rows / write_s),
        "pk_write_mib_s": round(mib / write_s, 1),
        "full_compaction_s": round(compaction_s, 3), "full_compaction_rows_s": round(rows.num_rows / compaction_s),
        "commits": [_commit(catalog, count) for count in commit_files],
    }


def _commit(catalog: pc.Catalog, count: int) -> dict[str, Any]:
    """``count`` writers of an append table prepare one small file each; one commit takes them all."""
    table = catalog.create_table(f"rates.commit_{count}", schema=pa.schema([("id", pa.int64())]),
                                 options={"bucket": "-1", "write-only": "true"})
    messages = []
    for index in range(count):
        with table.new_write() as writer:
            writer.write(pa.table({"id": pa.array([index] * 10, pa.int64())}))
            messages.append(writer.prepare().to_bytes())
    manifests = Path(table.uri.removeprefix("file://")) / "manifest"
    before = set(manifests.glob("manifest-*")) if manifests.exists() else set()
    started = time.perf_counter()
    table.commit(messages, commit_user="rates", commit_identifier=1)
    seconds = time.perf_counter() - started
    if table.read().num_rows != 10 * count:
        raise AssertionError(f"{count} writers of 10 rows committed, {table.read().num_rows} rows read")
    new = [p for p in set(manifests.glob("manifest-*")) - before if not p.name.startswith("manifest-list-")]
    return {"files": count, "commit_s": round(seconds, 4), "us_per_file": round(seconds / count * 1e6, 1),
            "message_bytes_per_file": round(sum(len(m) for m in messages) / count),
            "manifest_bytes_per_file": round(sum(p.stat().st_size for p in new) / count)}

"""paimon_core (ours): its side of every suite, run in ``.venv``.

Each class implements one suite's engine protocol; only the methods the protocol names as timed
run inside the timer. Setup (catalog, table handles) happens before it.
"""

from __future__ import annotations

import importlib
import shutil
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import paimon_core
from benchmarks import data
from benchmarks.suites import append, compaction, lookup, metadata, pk
from benchmarks.suites import changelog_workload as cl
from paimon_core.binary_row import encode_row, hash_arrow_rows, hash_bytes
from paimon_core.compaction import planning
from paimon_core.compaction.compactor import CompactionResult
from paimon_core.maintenance.reachable import References, manifest_lists
from paimon_core.types import MAX_LENGTH, atomic

# pyarrow imports pandas on its first pa.array() call, and pyarrow.dataset (which brings pandas too)
# on the first Table.filter(Expression). paimon_core makes both calls inside the steps, which would
# add about 0.25 s to the first write or filtered read of a process. Import them here so that
# imports stay outside the timer, as they do for the other engines (pypaimon imports both at import
# time). paimon_core imports them itself today; this keeps it so if that changes.
importlib.import_module("pyarrow.dataset")

DATABASE = "bench"


def create_table(warehouse: Path, name: str, schema: pa.Schema, **kwargs: Any) -> paimon_core.Table:
    """A new table in a new (or existing) filesystem warehouse."""
    catalog = paimon_core.Catalog(str(warehouse))
    catalog.create_database(DATABASE, exist_ok=True)
    return catalog.create_table(name, schema=schema, **kwargs)


def open_table(warehouse: Path, name: str) -> paimon_core.Table:
    return paimon_core.Catalog(str(warehouse)).get_table(name)


def _stored_rows(table: paimon_core.Table) -> int:
    return sum(f.row_count for f in table.files())


def _delta_rows(table: paimon_core.Table) -> int:
    snapshot = table.latest_snapshot()
    return snapshot.delta_record_count if snapshot is not None else 0


class Append:
    """Append suite: ``bucket=-1``, partitioned by ``dt``; every other option at its default."""

    def create(self, target: Path, buffer: str | None) -> paimon_core.Table:
        options = {"bucket": "-1", **({"write-buffer-size": buffer} if buffer else {})}
        return create_table(target, append.TABLE, append.SCHEMA, partition_keys=["dt"], options=options)

    def write(self, table: paimon_core.Table, rows: pa.Table) -> None:
        table.write(rows)

    def stream(self, table: paimon_core.Table, batches: Iterator[pa.RecordBatch]) -> None:
        with table.new_write() as writer:
            for batch in batches:
                writer.write(batch)
            writer.commit()

    def committed_rows(self, target: Path) -> int:
        return _stored_rows(open_table(target, append.TABLE))

    def read(self, target: Path, filtered: bool) -> Any:
        table = open_table(target, append.TABLE)
        if not filtered:
            return table.read
        condition = [("dt", "=", append.FILTER_DAY), ("level", "=", append.FILTER_LEVEL)]
        return lambda: table.read(filter=condition)


class Pk:
    """Primary-key suite: ``primary_keys=["id"]``, 4 buckets, merge engine deduplicate (the default)."""

    def create(self, target: Path) -> paimon_core.Table:
        return create_table(target, pk.TABLE, pk.SCHEMA, primary_keys=[pk.KEY], options={"bucket": pk.BUCKETS})

    def open(self, target: Path) -> paimon_core.Table:
        return open_table(target, pk.TABLE)

    def write(self, table: paimon_core.Table, rows: pa.Table) -> None:
        table.write(rows)

    def upsert(self, table: paimon_core.Table, rows: pa.Table) -> None:
        table.write(rows)

    def read(self, table: paimon_core.Table, key_range: tuple[int, int] | None) -> pa.Table:
        if key_range is None:
            return table.read()
        low, high = key_range
        return table.read(filter=[(pk.KEY, ">=", low), (pk.KEY, "<", high)])

    def committed_rows(self, table: paimon_core.Table) -> int:
        return _delta_rows(table)


class Compaction:
    """Compaction suite: write-only tables (writers never compact, so every commit stays a level-0
    file) compacted by the measured ``Table.compact(full=True)``."""

    OPTIONS = {
        "pk": {"bucket": compaction.PK_BUCKETS, "write-only": "true"},
        "append": {"bucket": "-1", "write-only": "true"},
    }

    @staticmethod
    def _name(scenario: str) -> str:
        return compaction.PK_TABLE if scenario == "pk" else compaction.APPEND_TABLE

    @staticmethod
    def _levels(table: paimon_core.Table) -> dict[str, int]:
        state = table.lsm_state()
        return {"max_level0_files": state.max_level0_files, "max_sorted_runs": state.max_sorted_runs}

    def build(self, target: Path, scenario: str, commits: Iterator[pa.Table]) -> dict[str, int]:
        keys = [compaction.PK_KEY] if scenario == "pk" else []
        table = create_table(target, self._name(scenario), compaction.schema_of(scenario), primary_keys=keys,
                             options=self.OPTIONS[scenario])
        for rows in commits:
            table.write(rows)
        files = table.files()
        return {"files": len(files), "rows": sum(f.row_count for f in files), "bytes": sum(f.file_size for f in files),
                **self._levels(table)}

    def open(self, target: Path, scenario: str) -> paimon_core.Table:
        return open_table(target, self._name(scenario))

    def compact(self, table: paimon_core.Table, scenario: str) -> CompactionResult:
        return table.compact(full=True)

    def compacted(self, table: paimon_core.Table, scenario: str, result: CompactionResult) -> dict[str, int]:
        return {"rows_in": result.rows_in, "rows_out": result.rows_out, "files_in": result.files_in,
                "files_out": result.files_out, "bytes_in": result.bytes_in, "bytes_out": result.bytes_out,
                **self._levels(table)}

    def read(self, table: paimon_core.Table, scenario: str, state: str) -> pa.Table:
        return table.read()

    def full_read_check(self, scenario: str) -> bool:
        return True


def force_level0_up() -> None:
    """Make ``compact()`` push every level-0 file up on a plain table, as it does on lookup tables.

    This stands in for Paimon's ``compaction.force-up-level-0``, which paimon_core does not have:
    its planner forces level 0 up for the tables that ``planning.needs_lookup`` names, and in this
    process that is every table. A plain table then runs the lookup table's compaction plan,
    without lookups or changelog.
    """
    if not callable(getattr(planning, "needs_lookup", None)):
        raise SystemExit("paimon_core.compaction.planning.needs_lookup is gone: update force_level0_up()")
    planning.needs_lookup = lambda options: True


class Changelog:
    """Changelog suite: one table per variant, compacted as the variant says after every batch."""

    @staticmethod
    def _variant(name: str) -> cl.Variant:
        variant = cl.VARIANTS[name]
        if variant.force_level0:
            force_level0_up()
        return variant

    @staticmethod
    def _write_batch(table: paimon_core.Table, upserts: pa.Table, deletes: pa.Table) -> None:
        """One commit: the batch's updates and inserts, then its deletes."""
        with table.new_write() as writer:
            writer.write(upserts)
            writer.delete(deletes)
            writer.commit()

    def build(self, target: Path, variant: str, directory: Path, batches: int) -> None:
        """Write the base and compact it fully; then per batch write it, copy the table to
        ``state_dir(target, n)`` and compact it as the variant does, which gives the next state."""
        chosen = self._variant(variant)
        work = target / "building"
        table = create_table(work, cl.TABLE, cl.SCHEMA, primary_keys=[cl.KEY], options=chosen.options())
        table.write(cl.load_base(directory))
        table.compact(full=True)
        for index in range(1, batches + 1):
            self._write_batch(table, *cl.load_batch(directory, index))
            shutil.copytree(work, cl.state_dir(target, index))
            table.compact(full=chosen.full)
        shutil.rmtree(work)

    def open(self, target: Path, variant: str, directory: Path, batch: int) -> tuple[paimon_core.Table, bool, int]:
        chosen = self._variant(variant)
        table = open_table(target, cl.TABLE)
        latest = table.latest_snapshot()
        if latest is None:
            raise SystemExit(f"{target} holds no snapshot: build the states first")
        return table, chosen.full, latest.id

    def apply(self, handle: tuple[paimon_core.Table, bool, int]) -> CompactionResult:
        table, full, _ = handle
        return table.compact(full=full)

    def checks(self, handle: tuple[paimon_core.Table, bool, int], result: CompactionResult) -> dict[str, Any]:
        """What the compaction did and produced (its COMPACT snapshot's changelog), and what the
        table reads back."""
        table, _, before = handle
        after = result.snapshot_id
        return {"compacted": after is not None, "rows_in": result.rows_in, "rows_out": result.rows_out,
                "files_in": result.files_in, "files_out": result.files_out, "bytes_in": result.bytes_in,
                "bytes_out": result.bytes_out, "level0_files": table.lsm_state().max_level0_files,
                **self._changes(table, before, after), "table": data.keyed_fingerprint(table.read())}

    @staticmethod
    def _changes(table: paimon_core.Table, before: int, after: int | None) -> dict[str, Any]:
        """The changelog of the snapshots after ``before`` up to ``after``, counted per row kind.

        A failing changelog read is reported to the driver as a failed check, not as a failed step:
        the producers are the code under test here.
        """
        if after is None:
            return {"changes": cl.no_changes()}
        try:
            return {"changes": cl.change_counts(table.read_changes(before, after))}
        except Exception as error:
            return {"changes": cl.no_changes(), "changes_error": f"{type(error).__name__}: {error}"}


class Metadata:
    """Metadata suite: one variant's options on a write-only log table, an append compaction every
    :data:`metadata.COMPACT_EVERY` commits; then the manifests a scan of the latest snapshot reads."""

    def run(self, work: Path, variant: str, commits: int, rows: int) -> dict[str, Any]:
        options = {"write-only": "true", "compaction.min.file-num": "5", **metadata.VARIANTS[variant]}
        table = create_table(work, "bench.logs", metadata.schema(), options=options)
        commit_s = 0.0
        for c in range(commits):
            batch = metadata.batch(c, rows)
            started = time.perf_counter()
            table.write(batch)
            if (c + 1) % metadata.COMPACT_EVERY == 0:
                table.compact()
            commit_s += time.perf_counter() - started
        latest = table.latest_snapshot()
        if latest is None:
            raise SystemExit(f"{variant}: no snapshot after {commits} commits")
        references = References(table.file_io, table.paths)
        lists = manifest_lists(latest)
        metas = [m for name in lists for m in references.manifests(name)]
        list_bytes = sum(Path(table.paths.manifest_file(name)).stat().st_size for name in lists)
        plan_times = []
        for _ in range(metadata.PLAN_REPEATS):
            started = time.perf_counter()
            splits = table.plan()
            plan_times.append(time.perf_counter() - started)
        written = sum(p.stat().st_size for p in Path(table.paths.manifest_dir).iterdir())
        scanned = list_bytes + sum(m.file_size for m in metas)
        return {"variant": variant, "all_manifest_bytes": written, "scan_bytes": scanned, "manifests": len(metas),
                "plan_ms": statistics.median(plan_times) * 1000, "commit_s": commit_s, "splits": len(splits),
                "rows": table.read(columns=["c0"]).num_rows}


class Lookup:
    """Lookup suite: a write-only table of 8 buckets; ``level0`` never compacted, ``compacted`` a copy
    of it after ``compact(full=True)``."""

    def build(self, warehouse: Path, runs: list[pa.Table]) -> None:
        level0 = create_table(warehouse, f"{DATABASE}.level0", lookup.SCHEMA, primary_keys=["id"],
                              options={"bucket": lookup.BUCKETS, "write-only": "true"})
        for run in runs:
            level0.write(run)
        source = Path(level0.path)
        shutil.copytree(source, source.parent / "compacted")
        open_table(warehouse, f"{DATABASE}.compacted").compact(full=True)

    def open(self, warehouse: Path, shape: str) -> paimon_core.Table:
        return open_table(warehouse, f"{DATABASE}.{shape}")

    def data_files(self, table: paimon_core.Table) -> list[str]:
        return [table.paths.data_file("", split.bucket, meta.file_name)
                for split in table.plan() for meta in split.files]

    def layout(self, table: paimon_core.Table) -> dict[str, Any]:
        files = table.files()
        groups = [pq.ParquetFile(path, filesystem=table.file_io.arrow_fs).metadata.num_row_groups
                  for path in self.data_files(table)]
        return {"files": len(files), "files per bucket": len(files) / int(lookup.BUCKETS),
                "row groups": sum(groups), "rows per row group": round(sum(f.row_count for f in files) / sum(groups)),
                "data MiB": round(sum(f.file_size for f in files) / 2**20, 1)}

    def engines(self, table: paimon_core.Table, settings: lookup.Settings) -> list[lookup.LookupEngine]:
        """Cached lookups (a cache the decoded table fits, and Paimon's default 256 mb), the one-shot
        ``table.lookup``, and ``read(filter)``."""
        return [self._cached(table, "lookup, cache fits", settings.big_cache, settings.keys, settings.reps),
                self._cached(table, "lookup, 256 mb cache", "256 mb", settings.small_cache_calls, settings.reps),
                lookup.LookupEngine("table.lookup", lambda k: table.lookup({"id": [k]}),
                                    lambda keys: table.lookup({"id": keys}), settings.one_shot_calls, 10**9,
                                    settings.reps),
                lookup.LookupEngine("read(filter)", lambda k: table.read(filter=[("id", "=", k)]),
                                    lambda keys: table.read(filter=[("id", "in", keys.tolist())]),
                                    settings.read_calls, settings.read_chunks, 1)]

    @staticmethod
    def _cached(table: paimon_core.Table, name: str, cache: str, calls: int, reps: int) -> lookup.LookupEngine:
        cached = table.new_lookup(options={"lookup.cache-max-memory-size": cache})

        def extra() -> dict[str, Any]:
            stats = cached.stats
            total = stats.cache.hits + stats.cache.misses
            return {"cache MiB": round(stats.cache.bytes / 2**20, 1),
                    "hit rate": round(stats.cache.hits / max(total, 1), 3), "row groups decoded": stats.files_read,
                    "evictions": stats.cache.evictions}

        return lookup.LookupEngine(name, lambda k: cached.lookup({"id": [k]}),
                                   lambda keys: cached.lookup({"id": keys}), calls, 10**9, reps, extra)


class BucketHash:
    """Bucket-hash suite: Paimon's bucket hash of key columns, columnar (ours) and per row."""

    def columnar(self, columns: list[pa.Array], types: list[Any]) -> Any:
        return hash_arrow_rows(columns, types)

    def per_row(self, columns: list[pa.Array], types: list[Any], rows: int) -> list[int]:
        """The straightforward encode-one-row-then-hash loop over the first ``rows`` rows."""
        values = [c.slice(0, rows).to_pylist() for c in columns]
        return [hash_bytes(encode_row([v[i] for v in values], types)) for i in range(rows)]

    def key_types(self) -> dict[str, Any]:
        return {"BIGINT": atomic("BIGINT"), "INT": atomic("INT"), "STRING": atomic("VARCHAR", MAX_LENGTH)}


SUITES: dict[str, Any] = {"append": Append(), "pk": Pk(), "compaction": Compaction(), "changelog": Changelog(),
                          "metadata": Metadata(), "lookup": Lookup(), "bucket_hash": BucketHash()}

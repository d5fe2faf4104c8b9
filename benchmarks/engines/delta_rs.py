"""delta-rs (``deltalake`` 1.6.6): its side of the pk, compaction, changelog and metadata suites.

Runs in ``.venv-bench`` (deltalake, pyarrow, numpy; created by the harness on first use), so it must
not import paimon_core. Tables are unpartitioned. Opening a ``DeltaTable`` replays the log, which
corresponds to Paimon's scan planning, so it is inside the timer wherever a step opens one.
"""

from __future__ import annotations

import importlib
import json
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

from benchmarks import data
from benchmarks.suites import changelog_workload as cl
from benchmarks.suites import metadata, pk

# to_pyarrow_table() imports pyarrow.dataset on first use: keep that import outside the timer.
importlib.import_module("pyarrow.dataset")

CDF_KINDS = {"insert": "+I", "update_preimage": "-U", "update_postimage": "+U", "delete": "-D"}


def _add_actions(table: DeltaTable) -> pa.Table:
    return pa.table(table.get_add_actions(flatten=True))


def _total(actions: pa.Table, column: str) -> int:
    return int(pc.sum(actions.column(column)).as_py())


class Pk:
    """The initial write is ``write_deltalake``; an upsert is a MERGE on ``id`` (update all matched,
    insert the rest). Its default codec is snappy; the Paimon engines write zstd."""

    def create(self, target: Path) -> str:
        return str(target)  # write_deltalake creates the table

    def open(self, target: Path) -> str:
        return str(target)

    def write(self, path: str, rows: pa.Table) -> None:
        write_deltalake(path, rows)

    def upsert(self, path: str, rows: pa.Table) -> None:
        (DeltaTable(path).merge(source=rows, predicate=f"t.{pk.KEY} = s.{pk.KEY}", source_alias="s",
                                target_alias="t")
         .when_matched_update_all().when_not_matched_insert_all().execute())

    def read(self, path: str, key_range: tuple[int, int] | None) -> pa.Table:
        if key_range is None:
            return DeltaTable(path).to_pyarrow_table()
        low, high = key_range
        return DeltaTable(path).to_pyarrow_table(filters=[(pk.KEY, ">=", low), (pk.KEY, "<", high)])

    def committed_rows(self, path: str) -> int:
        metrics = DeltaTable(path).history(1)[0]["operationMetrics"]
        if "num_added_rows" in metrics:  # WRITE
            return int(metrics["num_added_rows"])
        return int(metrics["num_target_rows_inserted"]) + int(metrics["num_target_rows_updated"])  # MERGE


class Compaction:
    """Built by one ``write_deltalake(mode="append")`` per commit; Delta has no primary key, so the
    pk table keeps every version of every key. Compaction is ``optimize.compact()`` with its
    defaults (bin-packing into files of up to 100 MB, zstd level 4, one task per CPU)."""

    def build(self, target: Path, scenario: str, commits: Iterator[pa.Table]) -> dict[str, int]:
        for rows in commits:
            write_deltalake(str(target), rows, mode="append")
        actions = _add_actions(DeltaTable(str(target)))
        return {"files": actions.num_rows, "rows": _total(actions, "num_records"),
                "bytes": _total(actions, "size_bytes")}

    def open(self, target: Path, scenario: str) -> str:
        return str(target)

    def compact(self, path: str, scenario: str) -> dict[str, Any]:
        return DeltaTable(path).optimize.compact()

    def compacted(self, path: str, scenario: str, metrics: dict[str, Any]) -> dict[str, int]:
        table = DeltaTable(path)
        before = _add_actions(DeltaTable(path, version=table.version() - 1))
        after = _add_actions(table)
        added, removed = json.loads(metrics["filesAdded"]), json.loads(metrics["filesRemoved"])
        return {"rows_in": _total(before, "num_records"), "rows_out": _total(after, "num_records"),
                "files_in": int(metrics["numFilesRemoved"]), "files_out": int(metrics["numFilesAdded"]),
                "bytes_in": int(removed["totalSize"]), "bytes_out": int(added["totalSize"])}

    def read(self, path: str, scenario: str, state: str) -> pa.Table:
        return DeltaTable(path).to_pyarrow_table()

    def full_read_check(self, scenario: str) -> bool:
        return scenario == "append"  # the pk table holds every version: compare rows and key sum only


class Changelog:
    """The anchor: ``write_deltalake`` of the base, with ``delta.enableChangeDataFeed`` true for the
    ``cdf`` variant; the measured MERGE deletes the matched keys the batch deletes, updates the other
    matched keys and inserts the rest."""

    def build(self, target: Path, variant: str, directory: Path, batches: int) -> None:
        cdf = {"delta.enableChangeDataFeed": "true"} if variant == "cdf" else None
        write_deltalake(str(target), cl.load_base(directory), configuration=cdf)

    def open(self, target: Path, variant: str, directory: Path, batch: int) -> tuple[str, pa.Table, bool]:
        return str(target), cl.delta_source(*cl.load_batch(directory, batch)), variant == "cdf"

    def apply(self, handle: tuple[str, pa.Table, bool]) -> dict[str, Any]:
        path, source, _ = handle
        columns = {name: f"s.{name}" for name in cl.SCHEMA.names}
        return (DeltaTable(path).merge(source=source, predicate=f"t.{cl.KEY} = s.{cl.KEY}", source_alias="s",
                                       target_alias="t")
                .when_matched_delete(predicate="s.op_kind = 'D'")
                .when_matched_update(updates=columns, predicate="s.op_kind = 'U'")
                .when_not_matched_insert(updates=columns, predicate="s.op_kind = 'U'")
                .execute())

    def checks(self, handle: tuple[str, pa.Table, bool], metrics: dict[str, Any]) -> dict[str, Any]:
        """The MERGE's row counts, the table read back and (``cdf``) its change data feed per row kind."""
        path, _, cdf = handle
        table = DeltaTable(path)
        check: dict[str, Any] = {"updated": int(metrics["num_target_rows_updated"]),
                                 "inserted": int(metrics["num_target_rows_inserted"]),
                                 "deleted": int(metrics["num_target_rows_deleted"]),
                                 "table": data.keyed_fingerprint(table.to_pyarrow_table())}
        if cdf:
            version = table.version()
            feed = pa.table(table.load_cdf(starting_version=version, ending_version=version))
            counts = dict.fromkeys(cl.KINDS, 0)
            for row in feed.group_by("_change_type").aggregate([(cl.KEY, "count")]).to_pylist():
                counts[CDF_KINDS[row["_change_type"]]] = row[f"{cl.KEY}_count"]
            check["cdf"] = counts
        return check


class Metadata:
    """The metadata suite's anchor: appends of the same batches (``_delta_log`` bytes with its default
    stats on the first 32 columns and checkpoints every 100 commits), then the time to load the
    table and list its files."""

    def run(self, work: Path, variant: str, commits: int, rows: int) -> dict[str, Any]:
        path = str(work / "delta")
        commit_s = 0.0
        for c in range(commits):
            batch = metadata.batch(c, rows)
            started = time.perf_counter()
            write_deltalake(path, batch, mode="append")
            commit_s += time.perf_counter() - started
        loads = []
        for _ in range(metadata.PLAN_REPEATS):
            started = time.perf_counter()
            files = DeltaTable(path).file_uris()
            loads.append(time.perf_counter() - started)
        log_bytes = sum(p.stat().st_size for p in (Path(path) / "_delta_log").rglob("*") if p.is_file())
        return {"variant": variant, "all_manifest_bytes": log_bytes, "scan_bytes": None, "manifests": len(files),
                "plan_ms": statistics.median(loads) * 1000, "commit_s": commit_s, "splits": len(files)}


SUITES: dict[str, Any] = {"pk": Pk(), "compaction": Compaction(), "changelog": Changelog(), "metadata": Metadata()}

"""One step of the changelog benchmark's delta-rs anchor (``deltalake``), in a fresh process.

    .venv-bench/bin/python bench_changelog_delta.py STEP --variant plain|cdf --input DATA_DIR --target DIR
        [--batch N] [--profile OUT]

Run by changelog_bench.py in .venv-bench. ``build`` (not measured) writes the base as a new Delta
table, with ``delta.enableChangeDataFeed`` true for ``cdf``; ``merge`` MERGEs one batch into a copy
of it: delete the matched keys the batch deletes, update the other matched keys, insert the rest.
Loading the Delta log (``DeltaTable(path)``) is inside the timer, like scan planning for Paimon.
After the timer the step reads the table and, for ``cdf``, the change data feed of the MERGE.
"""

from __future__ import annotations

import argparse
import importlib
import shutil
from typing import Any

import bench_changelog_common as cl
import bench_common as bc
import bench_pk_common as pk
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

# to_pyarrow_table() imports pyarrow.dataset on first use: keep that import outside the timer.
importlib.import_module("pyarrow.dataset")

CDF_KINDS = {"insert": "+I", "update_preimage": "-U", "update_postimage": "+U", "delete": "-D"}


def build(args: argparse.Namespace) -> None:
    """Not a measured step: the base table that every MERGE repetition copies."""
    shutil.rmtree(args.target, ignore_errors=True)
    cdf = {"delta.enableChangeDataFeed": "true"} if args.variant == "cdf" else None
    base = pk.load_base(args.input)
    _, timing = bc.measure(lambda: write_deltalake(str(args.target), base, configuration=cdf))
    bc.report(timing, {"rows": base.num_rows})


def _merge(path: str, source: pa.Table) -> dict[str, Any]:
    columns = {name: f"s.{name}" for name in cl.SCHEMA.names}
    return (DeltaTable(path).merge(source=source, predicate=f"t.{cl.KEY} = s.{cl.KEY}", source_alias="s",
                                   target_alias="t")
            .when_matched_delete(predicate="s.op_kind = 'D'")
            .when_matched_update(updates=columns, predicate="s.op_kind = 'U'")
            .when_not_matched_insert(updates=columns, predicate="s.op_kind = 'U'")
            .execute())


def _cdf_counts(table: DeltaTable) -> dict[str, int]:
    """Rows of the latest version's change data feed, per Paimon row kind."""
    version = table.version()
    feed = pa.table(table.load_cdf(starting_version=version, ending_version=version))
    counts = {kind: 0 for kind in cl.KINDS}
    for row in feed.group_by("_change_type").aggregate([(cl.KEY, "count")]).to_pylist():
        counts[CDF_KINDS[row["_change_type"]]] = row[f"{cl.KEY}_count"]
    return counts


def merge(args: argparse.Namespace) -> None:
    source = cl.delta_source(*cl.load_batch(args.input, args.batch))
    path = str(args.target)
    metrics, timing = bc.measure(lambda: _merge(path, source), args.profile)
    table = DeltaTable(path)
    check: dict[str, Any] = {"updated": int(metrics["num_target_rows_updated"]),
                             "inserted": int(metrics["num_target_rows_inserted"]),
                             "deleted": int(metrics["num_target_rows_deleted"]),
                             "table": pk.fingerprint(table.to_pyarrow_table())}
    if args.variant == "cdf":
        check["cdf"] = _cdf_counts(table)
    bc.report(timing, check)


if __name__ == "__main__":
    bc.run_step(__doc__, {"build": build, "merge": merge}, cl.configure_step)

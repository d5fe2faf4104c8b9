"""One step of the changelog benchmark for paimon_core (ours), in a fresh process.

    .venv/bin/python bench_changelog_ours.py STEP --variant NAME --input DATA_DIR --target DIR
        [--batch N] [--batches N] [--profile OUT]

Run by changelog_bench.py; NAME is a key of bench_changelog_common.VARIANTS. STEP is

* ``build`` (not measured): create the variant's table, write the base and compact it fully; then
  for every batch write it (updates, inserts and deletes in one commit), copy the table to
  ``DIR/before_compaction_N`` and compact it as the variant does, which gives the next state;
* ``compact``: the measured compaction of such a copy (``--target``). After the timer it reads the
  changelog of the COMPACT snapshot (``read_changes``) and the whole table, for the driver's checks.
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

import paimon_core
from paimon_core.compaction import planning
from paimon_core.compaction.compactor import CompactionResult

# Imported here, outside the timer, as bench_ours.py explains: paimon_core otherwise pulls in
# pyarrow.dataset (and pandas) on its first filtered read or pa.array() call inside the step.
importlib.import_module("pyarrow.dataset")


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


def _variant(args: argparse.Namespace) -> cl.Variant:
    variant = cl.VARIANTS[args.variant]
    if variant.force_level0:
        force_level0_up()
    return variant


def _write_batch(table: paimon_core.Table, upserts: pa.Table, deletes: pa.Table) -> None:
    """One commit: the batch's updates and inserts, then its deletes."""
    with table.new_write() as writer:
        writer.write(upserts)
        writer.delete(deletes)
        writer.commit()


def build(args: argparse.Namespace) -> None:
    """Not a measured step: it prepares the table states that the compaction repetitions copy."""
    variant = _variant(args)
    shutil.rmtree(args.target, ignore_errors=True)
    work = args.target / "building"

    def run() -> None:
        catalog = paimon_core.Catalog(str(work))
        catalog.create_database("bench", exist_ok=True)
        table = catalog.create_table(cl.TABLE, schema=cl.SCHEMA, primary_keys=[cl.KEY], options=variant.options())
        table.write(pk.load_base(args.input))
        table.compact(full=True)
        for index in range(1, args.batches + 1):
            _write_batch(table, *cl.load_batch(args.input, index))
            shutil.copytree(work, cl.state_dir(args.target, index))
            table.compact(full=variant.full)
        shutil.rmtree(work)

    _, timing = bc.measure(run)
    bc.report(timing, {"states": args.batches})


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


def _checks(table: paimon_core.Table, before: int, result: CompactionResult) -> dict[str, Any]:
    """What the compaction did and produced, and what the table reads back (after the timer)."""
    after = result.snapshot_id
    return {"compacted": after is not None, "rows_in": result.rows_in, "rows_out": result.rows_out,
            "files_in": result.files_in, "files_out": result.files_out, "bytes_in": result.bytes_in,
            "bytes_out": result.bytes_out, "level0_files": table.lsm_state().max_level0_files,
            **_changes(table, before, after), "table": pk.fingerprint(table.read())}


def compact(args: argparse.Namespace) -> None:
    variant = _variant(args)
    table = paimon_core.Catalog(str(args.target)).get_table(cl.TABLE)
    latest = table.latest_snapshot()
    if latest is None:
        raise SystemExit(f"{args.target} holds no snapshot: build the states first")
    result, timing = bc.measure(lambda: table.compact(full=variant.full), args.profile)
    bc.report(timing, _checks(table, latest.id, result))


if __name__ == "__main__":
    bc.run_step(__doc__, {"build": build, "compact": compact}, cl.configure_step)

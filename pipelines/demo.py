"""``make demo``: ingest a few days of log events through Dagster, re-run one, then query the table.

Run as ``python -m pipelines.demo [--days N] [--start YYYY-MM-DD]``. Runs go into the Dagster
instance at ``$DAGSTER_HOME`` (default ``.dagster_home/`` at the repo root, seeded from
``dagster_home/dagster.yaml``), so ``dagster dev -w workspace.yaml`` shows them afterwards;
the table goes to ``$PAIMON_WAREHOUSE`` (default ``warehouse/``).
"""

from __future__ import annotations

import argparse
import datetime as dt_
import logging
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import dagster as dg
import pyarrow as pa

import paimon_core as pc
from pipelines.assets import RUN_TAGS
from pipelines.definitions import REPO_ROOT, defs
from pipelines.log_events import PARTITION_COLUMN, TABLE
from pipelines.partitions import START_DATE
from resources import PaimonCatalogResource

log = logging.getLogger(__name__)

DAGSTER_HOME_TEMPLATE = REPO_ROOT / "dagster_home" / "dagster.yaml"
DEFAULT_DAGSTER_HOME = REPO_ROOT / ".dagster_home"
# Keep the demo's output to what it prints itself: Dagster's per-event DEBUG log goes to the
# instance (visible in the UI), only warnings reach the terminal.
QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
SNAPSHOTS_SHOWN = 12


def ensure_dagster_home() -> Path:
    """Use ``$DAGSTER_HOME`` or ``.dagster_home/``, seeding ``dagster.yaml`` from the template."""
    home = Path(os.environ.get("DAGSTER_HOME") or DEFAULT_DAGSTER_HOME).resolve()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        shutil.copyfile(DAGSTER_HOME_TEMPLATE, config)
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def demo_days(start: str, count: int) -> list[str]:
    first = dt_.date.fromisoformat(start)
    return [(first + dt_.timedelta(days=i)).isoformat() for i in range(count)]


def materialize_day(instance: dg.DagsterInstance, day: str) -> dg.ExecuteInProcessResult:
    """One partition through Dagster, with the same assets, checks and resources as the code location."""
    assets = [a for a in [*(defs.assets or []), *(defs.asset_checks or [])]
              if isinstance(a, dg.AssetsDefinition)]
    return dg.materialize(assets, partition_key=day, instance=instance, resources=defs.resources,
                          tags=RUN_TAGS, run_config=QUIET_RUN_CONFIG)


def describe_run(result: dg.ExecuteInProcessResult) -> str:
    """``snapshot 3 (OVERWRITE), 20,000 rows, 1 file(s), check passed``."""
    event = result.get_asset_materialization_events()[0]
    metadata = event.step_materialization_data.materialization.metadata
    checks = result.get_asset_check_evaluations()
    verdict = "check passed" if checks and all(c.passed for c in checks) else "CHECK FAILED"
    return (f"snapshot {metadata['snapshot_id'].value} ({metadata['commit_kind'].value}), "
            f"{metadata['rows_written'].value:,} rows, {metadata['files'].value} file(s), {verdict}")


def print_snapshots(table: pc.Table) -> None:
    snapshots = table.snapshots()
    shown = f", the last {SNAPSHOTS_SHOWN} shown" if len(snapshots) > SNAPSHOTS_SHOWN else ""
    print(f"\nSnapshots of {table.name} ({len(snapshots)}{shown}):")
    print(f"  {'id':>4}  {'kind':<10} {'committed (UTC)':<19}  {'total rows':>11}  partition")
    for snap in snapshots[-SNAPSHOTS_SHOWN:]:
        when = dt_.datetime.fromtimestamp(snap.time_millis / 1000, tz=dt_.UTC)
        partition = (snap.properties or {}).get("dagster.partition", "")
        print(f"  {snap.id:>4}  {snap.commit_kind:<10} {when:%Y-%m-%d %H:%M:%S}  "
              f"{snap.total_record_count:>11,}  {partition}")


def errors_per_service(table: pc.Table, day: str) -> pa.Table:
    """ERROR events and their mean latency per service for one day, most errors first."""
    errors = table.read(["service", "latency_ms"],
                        filter=[(PARTITION_COLUMN, "=", day), ("level", "=", "ERROR")])
    summary = errors.group_by("service").aggregate([("latency_ms", "count"), ("latency_ms", "mean")])
    return summary.sort_by([("latency_ms_count", "descending"), ("service", "ascending")])


def print_errors(table: pc.Table, day: str) -> None:
    summary = errors_per_service(table, day).to_pylist()
    print(f"\nErrors per service on {day} (filter dt = '{day}' AND level = 'ERROR'):")
    print(f"  {'service':<15} {'errors':>7}  {'mean latency ms':>15}")
    for row in summary:
        print(f"  {row['service']:<15} {row['latency_ms_count']:>7,}  {row['latency_ms_mean']:>15.1f}")


def run(days: Sequence[str]) -> None:
    home = ensure_dagster_home()
    instance = dg.DagsterInstance.get()
    catalog: PaimonCatalogResource = (defs.resources or {})["catalog"]
    print(f"Dagster home: {home}\nWarehouse:    {catalog.warehouse}\n")
    print(f"Materializing {len(days)} daily partitions of logs/events:")
    for day in days:
        started = time.monotonic()
        result = materialize_day(instance, day)
        print(f"  {day}: {describe_run(result)} in {time.monotonic() - started:.1f}s")
    again = days[len(days) // 2]
    table = catalog.table(TABLE)
    before = table.read([PARTITION_COLUMN], filter=[(PARTITION_COLUMN, "=", again)]).num_rows
    result = materialize_day(instance, again)
    after = table.read([PARTITION_COLUMN], filter=[(PARTITION_COLUMN, "=", again)]).num_rows
    print(f"\nRe-materialized {again}: {describe_run(result)}")
    print(f"  rows in {again}: {before:,} before, {after:,} after (replaced, not appended)")
    print_snapshots(table)
    print_errors(table, days[0])
    print(f"\nBrowse these runs: DAGSTER_HOME={home} dagster dev -w workspace.yaml -h 127.0.0.1")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--days", type=int, default=5, help="daily partitions to materialize")
    parser.add_argument("--start", default=START_DATE, help="first day (YYYY-MM-DD)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    run(demo_days(args.start, args.days))


if __name__ == "__main__":
    main()

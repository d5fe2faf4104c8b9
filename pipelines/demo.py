"""``make demo``: ingest a few days of log events and of order changes through Dagster, re-run a day, query, compact.

Run as ``python -m pipelines.demo [--days N] [--order-days N] [--start YYYY-MM-DD]``. Runs go into the Dagster
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
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pac

import paimon_core as pc
from paimon_core.compaction.state import LsmState
from pipelines.assets import RUN_TAGS
from pipelines.compaction import COMPACTION_JOB
from pipelines.definitions import REPO_ROOT, defs
from pipelines.log_events import PARTITION_COLUMN, TABLE
from pipelines.lsm import COMPACTION_TAG, check_outcomes, format_state
from pipelines.order_assets import ORDERS_KEY, ORDERS_RUN_TAGS, USER_ORDER_TOTALS_KEY
from pipelines.orders import ORDERS_TABLE, TOTALS_TABLE, order_batches
from pipelines.partitions import START_DATE
from resources import OrderEventSource, PaimonCatalogResource

log = logging.getLogger(__name__)

DAGSTER_HOME_TEMPLATE = REPO_ROOT / "dagster_home" / "dagster.yaml"
DEFAULT_DAGSTER_HOME = REPO_ROOT / ".dagster_home"
# Keep the demo's output to what it prints itself: Dagster's per-event DEBUG log goes to the
# instance (visible in the UI), only warnings reach the terminal.
QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
SNAPSHOTS_SHOWN = 12
TOP_USERS_SHOWN = 5


def ensure_dagster_home() -> Path:
    """Use ``$DAGSTER_HOME`` or ``.dagster_home/``, seeding ``dagster.yaml`` from the template."""
    home = Path(os.environ.get("DAGSTER_HOME") or DEFAULT_DAGSTER_HOME).resolve()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        shutil.copyfile(DAGSTER_HOME_TEMPLATE, config)
    elif COMPACTION_TAG not in config.read_text():
        print(f"Note: {config} predates the compaction jobs (no run limit on {COMPACTION_TAG}); kept as it "
              f"is. Copy {DAGSTER_HOME_TEMPLATE} over it (or delete it) to get the current settings.\n")
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def demo_days(start: str, count: int) -> list[str]:
    first = dt_.date.fromisoformat(start)
    return [(first + dt_.timedelta(days=i)).isoformat() for i in range(count)]


def materialize_day(instance: dg.DagsterInstance, day: str, *, group: str = "logs",
                    tags: dict[str, str] = RUN_TAGS) -> dg.ExecuteInProcessResult:
    """One partition of one asset group (with its checks) through Dagster, with the same
    definitions and resources as the code location, tagged like the group's job runs."""
    assets = [a for a in [*(defs.assets or []), *(defs.asset_checks or [])]
              if isinstance(a, dg.AssetsDefinition)]
    return dg.materialize(assets, selection=dg.AssetSelection.groups(group), partition_key=day,
                          instance=instance, resources=defs.resources, tags=tags,
                          run_config=QUIET_RUN_CONFIG)


def plain_metadata(result: dg.ExecuteInProcessResult, key: dg.AssetKey) -> dict[str, Any]:
    """The values of one asset's materialization metadata in a run."""
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == key]
    metadata = event.step_materialization_data.materialization.metadata
    return {name: getattr(value, "value", value) for name, value in metadata.items()}


def data_check_verdict(result: dg.ExecuteInProcessResult) -> str:
    """The partition's data-quality check (the LSM checks are shown with the compaction)."""
    checks = [c for c in result.get_asset_check_evaluations() if c.check_name.endswith("_partition_valid")]
    return "check passed" if checks and all(c.passed for c in checks) else "CHECK FAILED"


def describe_run(result: dg.ExecuteInProcessResult) -> str:
    """``snapshot 3 (OVERWRITE), 20,000 rows, 1 file(s), check passed``."""
    event = result.get_asset_materialization_events()[0]
    metadata = event.step_materialization_data.materialization.metadata
    verdict = data_check_verdict(result)
    return (f"snapshot {metadata['snapshot_id'].value} ({metadata['commit_kind'].value}), "
            f"{metadata['rows_written'].value:,} rows, {metadata['files'].value} file(s), {verdict}")


def print_snapshots(table: pc.Table) -> None:
    snapshots = table.snapshots()
    shown = f", the last {SNAPSHOTS_SHOWN} shown" if len(snapshots) > SNAPSHOTS_SHOWN else ""
    # A primary-key table's files keep superseded versions and -D rows until compaction.
    counted = "records" if table.schema.primary_keys else "total rows"
    print(f"\nSnapshots of {table.name} ({len(snapshots)}{shown}):")
    print(f"  {'id':>4}  {'kind':<10} {'committed (UTC)':<19}  {counted:>11}  partition")
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


def describe_orders_run(result: dg.ExecuteInProcessResult) -> str:
    """``orders snapshot 6 (APPEND): 7,191 changes in 5 commits (+I 2,000 ...) -> 1,845 live, check passed; ...``."""
    orders = plain_metadata(result, ORDERS_KEY)
    totals = plain_metadata(result, USER_ORDER_TOTALS_KEY)
    verdict = data_check_verdict(result)
    return (f"orders snapshot {orders['snapshot_id']} ({orders['commit_kind']}): "
            f"{orders['rows_written']:,} changes in {orders['commits']} commits (+I {orders['cdc_inserts']:,}, -U/+U "
            f"{orders['cdc_update_afters']:,}, -D {orders['cdc_deletes']:,}) -> "
            f"{orders['live_orders']:,} live, {verdict}; totals snapshot {totals['snapshot_id']} "
            f"({totals['commit_kind']}): {totals['users']:,} users")


def day_changes(day: str) -> pa.Table:
    """The day's change stream again, from the same (deterministic) source the asset used."""
    source: OrderEventSource = (defs.resources or {})["order_source"]
    return pa.Table.from_batches(order_batches(source, day))


def most_changed(changes: pa.Table, *, deleted: bool) -> int:
    """The order with the most changes among those (not) deleted that day."""
    gone = pac.unique(changes.filter(pac.equal(changes["op"], "-D"))["order_id"])
    is_gone = pac.is_in(changes["order_id"], value_set=gone)
    subset = changes.filter(is_gone if deleted else pac.invert(is_gone))
    counts = subset.group_by("order_id").aggregate([("op", "count")])
    ranked = counts.sort_by([("op_count", "descending"), ("order_id", "ascending")])
    return int(ranked["order_id"][0].as_py())


def print_order_rows(rows: pa.Table, *, with_op: bool = True) -> None:
    for row in rows.to_pylist():
        op = f"{row['op']:<3} " if with_op else ""
        print(f"    {op}{row['status']:<8} {row['amount']!s:>8}  {row['updated_at']:%H:%M:%S}  user {row['user_id']}")


def print_order(table: pc.Table, changes: pa.Table, day: str, order_id: int, *, label: str) -> None:
    """One order's changes of the day, then what a reader of the table sees for it."""
    history = changes.filter(pac.equal(changes["order_id"], order_id))
    print(f"\nOrder {order_id} ({label}): its {history.num_rows} changes on {day}, in stream order:")
    print(f"    {'op':<3} {'status':<8} {'amount':>8}  updated   user")
    print_order_rows(history)
    merged = table.read(filter=[(PARTITION_COLUMN, "=", day), ("order_id", "=", order_id)])
    if merged.num_rows == 0:
        print("  merged (what readers see): absent -- the -D removed it")
        return
    print("  merged (what readers see): one row, the newest version")
    print_order_rows(merged.select(["status", "amount", "updated_at", "user_id"]), with_op=False)


def print_top_users(totals: pc.Table, day: str) -> None:
    rows = totals.read(filter=[(PARTITION_COLUMN, "=", day)]).sort_by(
        [("total_amount", "descending"), ("user_id", "ascending")]).slice(0, TOP_USERS_SHOWN)
    print(f"\nTop {TOP_USERS_SHOWN} users on {day} in {totals.name} (aggregation merge engine: "
          f"one row per order written, folded per user on read):")
    print(f"  {'user':>5}  {'orders':>6}  {'total':>9}  {'max':>8}  {'last status':<11}  statuses")
    for row in rows.to_pylist():
        print(f"  {row['user_id']:>5}  {row['order_count']:>6}  {row['total_amount']!s:>9}  "
              f"{row['max_amount']!s:>8}  {row['last_status']:<11}  {row['statuses']}")


def run_orders(instance: dg.DagsterInstance, catalog: PaimonCatalogResource, days: Sequence[str]) -> None:
    """Apply a few days of order changes, re-apply one, and show what merge-on-read makes of them."""
    print(f"\nMaterializing {len(days)} daily partitions of shop/orders and shop/user_order_totals:")
    for day in days:
        started = time.monotonic()
        result = materialize_day(instance, day, group="shop", tags=ORDERS_RUN_TAGS)
        print(f"  {day}: {describe_orders_run(result)} in {time.monotonic() - started:.1f}s")
    again = days[len(days) // 2]
    orders = catalog.table(ORDERS_TABLE)
    before = orders.read(filter=[(PARTITION_COLUMN, "=", again)]).sort_by("order_id")
    result = materialize_day(instance, again, group="shop", tags=ORDERS_RUN_TAGS)
    after = orders.read(filter=[(PARTITION_COLUMN, "=", again)]).sort_by("order_id")
    print(f"\nRe-materialized {again}: {describe_orders_run(result)}")
    print(f"  live orders in {again}: {before.num_rows:,} before, {after.num_rows:,} after, "
          f"{'identical' if before.equals(after) else 'DIFFERENT'} (same changes applied again, newest wins)")
    print_snapshots(orders)
    changes = day_changes(again)
    print_order(orders, changes, again, most_changed(changes, deleted=False), label="updated")
    print_order(orders, changes, again, most_changed(changes, deleted=True), label="cancelled")
    print_top_users(catalog.table(TOTALS_TABLE), again)
    run_compaction(instance, catalog)


# ---- compaction -----------------------------------------------------------------------------


def timed_read(table: pc.Table) -> tuple[int, float]:
    """Rows of a full merged read and the best of three read times, in milliseconds."""
    best, rows = float("inf"), 0
    for _ in range(3):
        started = time.perf_counter()
        rows = table.read().num_rows
        best = min(best, time.perf_counter() - started)
    return rows, best * 1000


def print_checks(table: pc.Table, state: LsmState) -> None:
    for outcome in check_outcomes(table, state):
        verdict = "passed" if outcome.passed else f"FAILED ({outcome.severity.value})"
        print(f"  check {outcome.name}: {verdict}: {outcome.description}")


def run_compaction(instance: dg.DagsterInstance, catalog: PaimonCatalogResource) -> None:
    """Evaluate the compaction sensor of shop.orders as the daemon would, run what it requests, show the LSM."""
    orders = catalog.table(ORDERS_TABLE)
    before = orders.lsm_state()
    partitions = sorted({b.partition for b in before.buckets})
    rows_before, read_before = timed_read(orders)
    print(f"\nLSM shape of {ORDERS_TABLE} before compaction (snapshot {before.snapshot_id}; write-only, so every "
          f"commit added a level-0 file per bucket;\ncompaction trigger "
          f"{orders.options.sorted_run_compaction_trigger}, stop-trigger {before.stop_trigger}):")
    print(format_state(before))
    print_checks(orders, before)
    sensor = defs.resolve_sensor_def(f"compact_{ORDERS_TABLE.replace('.', '_')}_sensor")
    tick = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs,
                                                        resources={"catalog": catalog}))
    if not tick.run_requests:
        print(f"\nSensor {sensor.name}: skipped: {tick.skip_message}")
        return
    [request] = tick.run_requests
    config = request.run_config["ops"]["plan_compaction"]["config"]
    print(f"\nSensor {sensor.name} (cursor -> {tick.cursor}) requests run {request.run_key!r} of "
          f"{COMPACTION_JOB}:\n  partitions {config['partitions']}, tags {dict(request.tags)}")
    started = time.monotonic()
    job = defs.resolve_job_def(COMPACTION_JOB)
    result = job.execute_in_process(run_config={**request.run_config, **QUIET_RUN_CONFIG}, instance=instance,
                                    tags=request.tags)
    report = result.output_for_node("report_compaction")
    print(f"  run {result.run_id[:8]} {'succeeded' if result.success else 'FAILED'} in "
          f"{time.monotonic() - started:.1f}s: {report['partitions_compacted']} COMPACT snapshot(s) "
          f"{report['snapshots']}, {report['files_in']} files ({report['bytes_in']:,} bytes) -> "
          f"{report['files_out']} files ({report['bytes_out']:,} bytes)")
    after = orders.lsm_state()
    rows_after, read_after = timed_read(orders)
    print(f"\nLSM shape of {ORDERS_TABLE} after compaction (snapshot {after.snapshot_id}):")
    print(format_state(after, partitions=partitions))
    print_checks(orders, after)
    print(f"  full read: {rows_before:,} rows in {read_before:.1f} ms before, {rows_after:,} rows in "
          f"{read_after:.1f} ms after ({'same rows' if rows_before == rows_after else 'ROWS DIFFER'})")
    again = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs, cursor=tick.cursor,
                                                         resources={"catalog": catalog}))
    print(f"Sensor {sensor.name} again: {again.skip_message or again.run_requests}")


def run(days: Sequence[str], order_days: Sequence[str] = ()) -> None:
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
    if order_days:
        run_orders(instance, catalog, order_days)
    print(f"\nBrowse these runs: DAGSTER_HOME={home} dagster dev -w workspace.yaml -h 127.0.0.1")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--days", type=int, default=5, help="daily partitions to materialize")
    parser.add_argument("--order-days", type=int, default=3,
                        help="daily partitions of the shop (orders) assets to materialize")
    parser.add_argument("--start", default=START_DATE, help="first day (YYYY-MM-DD)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    run(demo_days(args.start, args.days), demo_days(args.start, args.order_days))


if __name__ == "__main__":
    main()

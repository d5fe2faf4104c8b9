"""Tables declaring a backfill policy: a range of partitions written by one run, each partition its
own exactly-once commit, materialization and check evaluation.

``dagster asset materialize --partition-range`` is run as a user runs it, on a project in the
``dg`` layout; the failure and retry cases run the table's job in process with the tags Dagster
puts on a ranged run (the CLI's, and a single-run backfill's).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pac
import pyarrow.parquet as pq
import pytest

import paimon_core as pc
from pipelines import Column, Ingestion, Input, PaimonTableSpec, Partitions, names
from pipelines.errors import TableDefinitionError
from resources import keys
from tests.support.dg_projects import command, dagster_home_of, dg_project
from tests.support.metadata_values import value_of

REPO = Path(__file__).resolve().parents[2]
# The run tags of a ranged run (set by `dagster asset materialize --partition-range` and by the
# backfill daemon for a single-run policy).
RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"
READINGS, LEDGER = "lake.readings", "lake.ledger"
DAYS = ("2024-01-02", "2024-01-03", "2024-01-04")
FILES = {
    "pyproject.toml": '[tool.dg]\ndirectory_type = "project"\n\n[tool.dg.project]\nroot_module = "ranges"\n',
    "ranges/__init__.py": "",
    "ranges/definitions.py": """\
from pathlib import Path

import dagster as dg

defs = dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
""",
    "ranges/defs/__init__.py": "",
    "ranges/defs/lake/defs.yaml": """\
type: pipelines.component.PaimonTables
attributes:
  warehouse: "{{ env.PAIMON_WAREHOUSE }}"
  tables:
    - table: lake.readings
      columns: [{name: sensor, type: STRING}, {name: value, type: DOUBLE}, {name: dt, type: STRING NOT NULL}]
      partition_keys: [dt]
      partitions: {kind: daily, start: "2024-01-01", end: "2024-01-08"}
      ingestion:
        mode: overwrite
        landing: {path: "{{ env.LANDING_ROOT }}/readings/dt={partition}/*.parquet"}
        backfill_policy: single_run
        retries: 0
      checks: {not_null: [value]}
    - table: lake.ledger
      columns: [{name: amount, type: BIGINT}, {name: day_seen, type: STRING}, {name: dt, type: STRING NOT NULL}]
      partition_keys: [dt]
      partitions: {kind: daily, start: "2024-01-01", end: "2024-01-08"}
      ingestion:
        mode: append
        function: "ranges.sources:ledger"
        backfill_policy: multi_run
        max_partitions_per_run: 3
        retries: 1
        retry_delay_seconds: 0.01
""",
    "ranges/sources.py": """\
import os
from pathlib import Path

import dagster as dg
import pyarrow as pa


def ledger(context: dg.AssetExecutionContext) -> pa.Table:
    # Fails once for the partition named in LEDGER_FLAKY_DAY, as a storage error would (retryable).
    flag = Path(os.environ["LANDING_ROOT"]) / f"failed-{context.partition_key}"
    if context.partition_key == os.environ.get("LEDGER_FLAKY_DAY") and not flag.exists():
        flag.write_text("once")
        raise OSError(f"connection reset while fetching {context.partition_key}")
    return pa.table({"amount": pa.array([10, -4], pa.int64()), "day_seen": [context.partition_key] * 2})
""",
}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with dg_project(tmp_path, monkeypatch, "ranges", FILES) as root:
        yield root


def land_readings(day: str, values: list[float | None]) -> None:
    folder = Path(os.environ["LANDING_ROOT"]) / "readings" / f"dt={day}"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"sensor": [f"s{i}" for i in range(len(values))], "value": pa.array(values, pa.float64())}),
                   folder / "part-0.parquet")


def table(name: str) -> pc.Table:
    return pc.Catalog(os.environ["PAIMON_WAREHOUSE"]).get_table(name)


def rows_per_day(name: str) -> dict[str, int]:
    counts = table(name).read(["dt"]).group_by("dt").aggregate([([], "count_all")])
    return dict(zip(counts["dt"].to_pylist(), counts["count_all"].to_pylist(), strict=True))


def project_defs() -> dg.Definitions:
    return importlib.import_module("ranges.definitions").defs


def ranged_run(instance: dg.DagsterInstance, table_name: str, first: str, last: str) -> dg.ExecuteInProcessResult:
    job = project_defs().resolve_job_def(names.ingestion_job(table_name))
    return job.execute_in_process(instance=instance, tags={RANGE_START: first, RANGE_END: last}, raise_on_error=False)


def materializations(instance: dg.DagsterInstance, key: dg.AssetKey) -> list[dg.AssetMaterialization]:
    records = instance.fetch_materializations(key, limit=100, ascending=True).records
    return [r.asset_materialization for r in records if r.asset_materialization is not None]


def test_the_cli_materializes_a_partition_range_in_one_run(project: Path, instance: dg.DagsterInstance) -> None:
    sizes = dict(zip(DAYS, (3, 5, 2), strict=True))
    for day, size in sizes.items():
        land_readings(day, [float(i) for i in range(size)])
    done = command(project, "dagster", "asset", "materialize", "-m", "ranges.definitions", "--select", "lake/readings",
                   "--partition-range", f"{DAYS[0]}...{DAYS[-1]}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert rows_per_day(READINGS) == sizes

    with dg.DagsterInstance.from_config(str(dagster_home_of(project))) as cli_instance:
        [run] = cli_instance.get_runs()
        assert run.status == dg.DagsterRunStatus.SUCCESS
        events = materializations(cli_instance, dg.AssetKey(["lake", "readings"]))
        # One materialization per partition, each with its own partition's figures.
        assert {e.partition: value_of(e.metadata[keys.INGEST_ROWS_WRITTEN]) for e in events} == sizes
        snapshots = {e.partition: value_of(e.metadata[keys.INGEST_SNAPSHOT_ID]) for e in events}
        assert len(set(snapshots.values())) == 3  # a commit each
        checks = cli_instance.event_log_storage.get_asset_check_execution_history(
            dg.AssetCheckKey(dg.AssetKey(["lake", "readings"]), names.DATA_CHECK), limit=10)
        evaluations = [c.event.asset_check_evaluation for c in checks if c.event is not None]
        assert sorted((e.partition, e.passed) for e in evaluations if e is not None) == [(d, True) for d in DAYS]


def test_a_partition_failing_mid_range_names_those_committed_before(project: Path,
                                                                    instance: dg.DagsterInstance) -> None:
    land_readings(DAYS[0], [1.0, 2.0])
    land_readings(DAYS[2], [3.0])  # DAYS[1] has no files
    result = ranged_run(instance, READINGS, DAYS[0], DAYS[2])
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    said = failure.step_failure_data.error.message if failure.step_failure_data.error else ""
    said += str(failure.step_failure_data.user_failure_data.description if failure.step_failure_data.user_failure_data
                else "")
    assert f"no landed files for partition {DAYS[1]}" in said and f"committed before {DAYS[1]}: {DAYS[0]}" in said
    # What landed is in the table and recorded as materialized; nothing after the failure was written.
    assert rows_per_day(READINGS) == {DAYS[0]: 2}
    assert [e.partition for e in materializations(instance, dg.AssetKey(["lake", "readings"]))] == [DAYS[0]]


def test_a_retried_ranged_step_writes_each_partition_once(project: Path, instance: dg.DagsterInstance,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_FLAKY_DAY", DAYS[1])
    result = ranged_run(instance, LEDGER, DAYS[0], DAYS[2])
    assert result.success
    # Appends: the first partition's commit landed before the failure and was not written again.
    assert rows_per_day(LEDGER) == {day: 2 for day in DAYS}
    seen = table(LEDGER).read(["dt", "day_seen"])
    assert pac.all(pac.equal(seen["dt"], seen["day_seen"])).as_py()  # each call saw its own partition
    events = materializations(instance, dg.AssetKey(["lake", "ledger"]))
    # The first partition twice: when the step failed (it was in the table) and when the retry reused it.
    assert [(e.partition, value_of(e.metadata[keys.INGEST_REUSED_COMMIT])) for e in events] == [
        (DAYS[0], False), (DAYS[0], True), (DAYS[1], False), (DAYS[2], False)]


def test_a_failing_partition_of_a_range_fails_its_own_check(project: Path, instance: dg.DagsterInstance) -> None:
    land_readings(DAYS[0], [1.0])
    land_readings(DAYS[1], [None, 2.0])
    result = ranged_run(instance, READINGS, DAYS[0], DAYS[1])
    assert not result.success  # the check is blocking
    verdicts = {e.partition: (e.passed, e.description) for e in result.get_asset_check_evaluations()
                if e.check_name == names.DATA_CHECK}
    assert verdicts == {DAYS[0]: (True, f"{DAYS[0]}: 1 rows, all rules hold"),
                        DAYS[1]: (False, f"{DAYS[1]}: 1 null value")}


def test_the_assets_carry_their_backfill_policies(project: Path) -> None:
    defs = project_defs()
    readings = defs.resolve_assets_def(dg.AssetKey(["lake", "readings"]))
    ledger = defs.resolve_assets_def(dg.AssetKey(["lake", "ledger"]))
    assert readings.backfill_policy == dg.BackfillPolicy.single_run()
    assert ledger.backfill_policy == dg.BackfillPolicy.multi_run(3)


def source(context: dg.AssetExecutionContext, ingest_slice: object = None) -> pa.Table:
    return pa.table({"v": [1]})


def ranged_spec(partitions: Partitions | None = None, **ingestion: object) -> PaimonTableSpec:
    return PaimonTableSpec("lake.t", columns=(Column("v", "BIGINT"), Column("dt", "STRING")), partition_keys=("dt",),
                           partitions=partitions or Partitions("daily", start="2024-01-01"),
                           ingestion=Ingestion(mode="append", function=source, **ingestion))  # type: ignore[arg-type]


@pytest.mark.parametrize(("ingestion", "said"), [
    ({"backfill_policy": "one_run"}, "'one_run' is not one of multi_run, single_run"),
    ({"max_partitions_per_run": 0}, "must be at least 1"),
    ({"backfill_policy": "single_run", "max_partitions_per_run": 4}, "drop max_partitions_per_run"),
    ({"backfill_policy": "single_run", "inputs": {"up": Input(("a", "b"))}}, "cannot have inputs"),
    ({"max_partitions_per_run": 2, "commit_every_rows": 100}, "cannot have commit_every_rows"),
])
def test_what_a_run_of_several_partitions_cannot_do_is_refused(ingestion: dict[str, object], said: str) -> None:
    with pytest.raises(TableDefinitionError, match=said) as refused:
        ranged_spec(**ingestion)
    assert "lake.t" in str(refused.value) and "ingestion." in str(refused.value)


def test_an_unpartitioned_table_has_no_range_to_run() -> None:
    with pytest.raises(TableDefinitionError, match="no partitions to put several in one run"):
        ranged_spec(Partitions("none"), backfill_policy="single_run")
    assert ranged_spec(backfill_policy="single_run").ingestion.ranged()  # type: ignore[union-attr]

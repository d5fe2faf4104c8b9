"""The README's quickstarts, executed: a user's project in YAML, and in Python.

The files are taken from the README as they are (every ``<!-- user-example: path -->`` block) and
written into a fresh project. Each project must pass ``dagster definitions validate``, ingest its
two tables (files landed for the append table, found by its landing sensor; a DataFrame from the
user's function for the primary-key table), and get its sensor-launched compaction and its
scheduled maintenance with observations and check results on *its* asset keys and partitions.
"""

from __future__ import annotations

import datetime as dt_
import importlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import paimon_core as pc
from pipelines import names
from resources import keys

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
EXAMPLE = re.compile(r"<!-- user-example: (?P<path>\S+) -->\n```[a-z]*\n(?P<body>.*?)```", re.DOTALL)
CLICKS = dg.AssetKey(["lake", "web", "clicks"])
CUSTOMERS = dg.AssetKey(["lake", "crm", "customers"])
DAYS = ("2024-01-01", "2024-01-02")
PROJECTS = {"yaml": ("my_project", "my_project.definitions"),
            "python": ("my_python_project", "my_python_project.definitions")}


def readme_examples() -> dict[str, str]:
    examples = {m["path"]: m["body"] for m in EXAMPLE.finditer(README.read_text())}
    assert {"my_project/defs/lake/defs.yaml", "my_project/sources.py", "my_python_project/definitions.py"} <= set(
        examples), sorted(examples)
    return examples


def example_lines() -> dict[str, int]:
    """Lines of each user example, as the closing note reports them."""
    return {path: body.count("\n") for path, body in readme_examples().items()}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The README's files written into ``tmp_path``, importable, with its environment set."""
    for path, body in readme_examples().items():
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)
    # The python project's pyproject is not needed; the YAML one says where its defs are.
    monkeypatch.setenv("PAIMON_WAREHOUSE", str(tmp_path / "warehouse"))
    monkeypatch.setenv("LANDING_ROOT", str(tmp_path / "landing"))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.split(".")[0] in ("my_project", "my_python_project")]:
        del sys.modules[name]


def land_clicks(root: Path, day: str, rows: int = 50) -> None:
    folder = root / "landing" / "clicks" / f"dt={day}"
    folder.mkdir(parents=True, exist_ok=True)
    start = dt_.datetime.fromisoformat(day)
    pq.write_table(pa.table({
        "ts": pa.array([start + dt_.timedelta(minutes=i) for i in range(rows)], pa.timestamp("us")),
        "user_id": pa.array(range(rows), pa.int64()),
        "url": pa.array([f"/page/{i % 7}" for i in range(rows)]),
    }), folder / "part-0.parquet")
    (folder / "_SUCCESS").write_text("")


def load_defs(module: str) -> dg.Definitions:
    defs = importlib.import_module(module).defs
    assert isinstance(defs, dg.Definitions)
    return defs


def run_request(defs: dg.Definitions, instance: dg.DagsterInstance, request: dg.RunRequest,
                job_name: str) -> dg.ExecuteInProcessResult:
    job = defs.resolve_job_def(request.job_name or job_name)
    return job.execute_in_process(run_config=request.run_config, tags=request.tags, instance=instance,
                                  partition_key=request.partition_key)


def tick_sensor(defs: dg.Definitions, instance: dg.DagsterInstance, name: str,
                cursor: str | None = None) -> dg.SensorExecutionData:
    with dg.build_sensor_context(instance=instance, cursor=cursor, resources=defs.resources,
                                 definitions=defs) as context:
        return defs.resolve_sensor_def(name).evaluate_tick(context)


def observations(instance: dg.DagsterInstance, key: dg.AssetKey) -> list[dg.AssetObservation]:
    """The asset's observations, as the UI's asset page lists them (from the instance's event log)."""
    records = instance.fetch_observations(key, limit=100).records
    found = [record.asset_observation for record in records]
    return [observation for observation in found if observation is not None]


@pytest.mark.parametrize("flavour", sorted(PROJECTS))
def test_definitions_validate(project: Path, flavour: str) -> None:
    module = PROJECTS[flavour][1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(project), str(REPO)]), "DAGSTER_HOME": ""}
    env.pop("DAGSTER_HOME")
    done = subprocess.run([str(Path(sys.executable).parent / "dagster"), "definitions", "validate", "-m", module],
                          cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Validation successful" in done.stdout + done.stderr


@pytest.mark.parametrize("flavour", sorted(PROJECTS))
def test_user_tables_get_everything(project: Path, flavour: str, instance: dg.DagsterInstance) -> None:
    defs = load_defs(PROJECTS[flavour][1])
    # ---- what the definitions carry before any run ----
    clicks_spec, customers_spec = (defs.resolve_assets_def(key).specs_by_key[key] for key in (CLICKS, CUSTOMERS))
    schema = customers_spec.metadata["dagster/column_schema"]
    columns = {c.name: c for c in schema.columns}
    assert "primary key" in columns["customer_id"].constraints.other
    assert customers_spec.metadata["dagster/table_name"] == "crm.customers"
    assert customers_spec.kinds == {"paimon", "parquet", "table"}
    assert customers_spec.owners == ["team:crm"]
    assert clicks_spec.partitions_def is not None and len(clicks_spec.partitions_def.get_partition_keys()) == 7
    checks = {key.name for key in defs.resolve_asset_graph().asset_check_keys if key.asset_key == CUSTOMERS}
    assert checks == {names.DATA_CHECK, names.LEVEL0_CHECK, names.SMALL_FILES_CHECK, names.RETENTION_CHECK,
                      names.ORPHANS_CHECK, names.INSTANCE_CHECK}

    # ---- files land; the landing sensor launches one run per partition ----
    for day in DAYS:
        land_clicks(project, day)
    landed = tick_sensor(defs, instance, names.landing_sensor("web.clicks"))
    assert sorted(r.partition_key for r in landed.run_requests) == list(DAYS)
    for request in landed.run_requests:
        result = run_request(defs, instance, request, names.ingestion_job("web.clicks"))
        assert result.success
        assert all(c.passed for c in result.get_asset_check_evaluations())
    again = tick_sensor(defs, instance, names.landing_sensor("web.clicks"), cursor=landed.cursor)
    assert not again.run_requests and again.skip_message
    catalog = pc.Catalog(os.environ["PAIMON_WAREHOUSE"])
    assert catalog.get_table("web.clicks").read(["dt"]).num_rows == 100

    # ---- the user's function feeds the primary-key table; re-runs add level-0 files ----
    job = defs.resolve_job_def(names.ingestion_job("crm.customers"))
    for _ in range(3):
        result = job.execute_in_process(partition_key=DAYS[0], instance=instance)
        assert result.success
    [materialization] = result.get_asset_materialization_events()[-1:]
    assert materialization.asset_key == CUSTOMERS and materialization.partition == DAYS[0]
    assert materialization.materialization.metadata["dagster/partition_row_count"].value == 10
    assert {c.check_name: c.passed for c in result.get_asset_check_evaluations()}[names.DATA_CHECK]
    customers = catalog.get_table("crm.customers")
    assert customers.read().num_rows == 10

    # ---- the compaction sensor launches the compaction job; its observation lands on the partition ----
    tick = tick_sensor(defs, instance, names.compaction_sensor("crm.customers"))
    assert len(tick.run_requests) == 1, tick.skip_message
    [request] = tick.run_requests
    compacted = run_request(defs, instance, request, names.compaction_job("crm.customers"))
    assert compacted.success
    [observed] = [o for o in observations(instance, CUSTOMERS) if keys.COMPACTION_SNAPSHOT_ID in o.metadata]
    assert observed.partition is None and keys.COMPACTION_PARTITIONS in observed.metadata
    assert {e.asset_key for e in compacted.get_asset_check_evaluations()} == {CUSTOMERS}
    assert customers.lsm_state().max_level0_files == 0

    # ---- the maintenance schedules' runs record its checks (and, with nothing to delete, no event) ----
    for name, check in ((names.expire_schedule("crm.customers"), names.RETENTION_CHECK),
                        (names.orphans_schedule("crm.customers"), names.ORPHANS_CHECK)):
        schedule = defs.resolve_schedule_def(name)
        with dg.build_schedule_context(instance=instance, resources=defs.resources) as context:
            data = schedule.evaluate_tick(context)
        [request] = data.run_requests or []
        ran = run_request(defs, instance, request, schedule.job_name)
        assert ran.success
        assert [(e.asset_key, e.check_name) for e in ran.get_asset_check_evaluations()] == [(CUSTOMERS, check)]
    maintenance = [o for o in observations(instance, CUSTOMERS) if any(k.startswith(keys.MAINTENANCE_PREFIX)
                                                                         for k in o.metadata)]
    assert maintenance == []  # young snapshots, no orphans: nothing deleted, no event on the asset
    assert defs.resolve_schedule_def(names.expire_schedule("crm.customers")).cron_schedule == "30 * * * *"

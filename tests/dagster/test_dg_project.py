"""A user's project in the ``dg`` layout: a ``PaimonTables`` component per team folder and a Python
declaration beside them, in one code location.

The project is written here as a user writes one (``pyproject.toml``, ``definitions.py`` loading
the defs folder, ``defs/web/defs.yaml``, ``defs/crm/defs.yaml``, ``defs/finance.py``). It must pass
``dg check yaml``, ``dg check defs`` and ``dagster definitions validate``, and each of its tables
must be ingested, compacted by its own sensor's run and maintained by its own schedules' runs.
"""

from __future__ import annotations

import datetime as dt_
import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import paimon_core as pc
from pipelines import names
from resources.keys import COMPACTION_TAG
from tests.support.dagster_runs import causes_of
from tests.support.dg_projects import command, dg_project

REPO = Path(__file__).resolve().parents[2]
DAY = "2024-01-02"
TABLES = ("web.clicks", "crm.customers", "finance.ledger", "archive.visits")
FILES = {
    "pyproject.toml": """\
[tool.dg]
directory_type = "project"

[tool.dg.project]
root_module = "teams"
""",
    "teams/__init__.py": "",
    "teams/definitions.py": """\
from pathlib import Path

import dagster as dg

defs = dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
""",
    "teams/defs/__init__.py": "",
    "teams/defs/web/defs.yaml": """\
type: pipelines.component.PaimonTables
attributes:
  warehouse: "{{ env.PAIMON_WAREHOUSE }}"
  tables:
    - table: web.clicks
      columns: [{name: ts, type: TIMESTAMP(6)}, {name: url, type: STRING NOT NULL}, {name: dt, type: STRING NOT NULL}]
      primary_key: [dt, url]
      partition_keys: [dt]
      options: {bucket: "1", num-sorted-run.compaction-trigger: "2"}
      partitions: {kind: daily, start: "2024-01-01", end: "2024-01-08"}
      ingestion:
        mode: upsert
        landing: {path: "{{ env.LANDING_ROOT }}/clicks/dt={partition}/*.parquet"}
""",
    "teams/defs/crm/defs.yaml": """\
type: pipelines.component.PaimonTables
attributes:
  warehouse: "{{ env.PAIMON_WAREHOUSE }}"
  tables:
    - table: crm.customers
      columns: [{name: dt, type: STRING NOT NULL}, {name: id, type: BIGINT NOT NULL}, {name: name, type: STRING}]
      primary_key: [dt, id]
      partition_keys: [dt]
      options: {bucket: "1", num-sorted-run.compaction-trigger: "2"}
      partitions: {kind: daily, start: "2024-01-01", end: "2024-01-08"}
      ingestion: {mode: upsert, function: "teams.sources:customers"}
""",
    "teams/defs/finance.py": """\
import os

import dagster as dg

from pipelines import Column, Ingestion, PaimonTableSpec, Partitions, paimon_definitions
from teams.sources import ledger


@dg.definitions
def defs() -> dg.Definitions:
    spec = PaimonTableSpec(
        "finance.ledger", columns=(Column("dt", "STRING"), Column("amount", "BIGINT")), partition_keys=("dt",),
        options={"compaction.min.file-num": "2"},
        partitions=Partitions("daily", start="2024-01-01", end="2024-01-08"),
        ingestion=Ingestion(mode="append", function=ledger))
    return paimon_definitions([spec], warehouse=os.environ["PAIMON_WAREHOUSE"])
""",
    "teams/sources.py": """\
import dagster as dg
import pyarrow as pa


def customers(context: dg.AssetExecutionContext) -> pa.Table:
    return pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", context.partition_key]})


def ledger(context: dg.AssetExecutionContext) -> pa.Table:
    return pa.table({"amount": pa.array([10, -4], pa.int64())})
""",
}

# A second warehouse in the same code location: its resources are named after it.
FILES["teams/defs/archive/defs.yaml"] = FILES["teams/defs/crm/defs.yaml"].replace(
    '"{{ env.PAIMON_WAREHOUSE }}"', '"{{ env.ARCHIVE_WAREHOUSE }}"\n  catalog_name: archive').replace(
    "crm.customers", "archive.visits")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("ARCHIVE_WAREHOUSE", str(tmp_path / "archive_warehouse"))
    with dg_project(tmp_path, monkeypatch, "teams", FILES) as root:
        yield root


def catalog_of(table: str) -> pc.Catalog:
    return pc.Catalog(os.environ["ARCHIVE_WAREHOUSE" if table.startswith("archive.") else "PAIMON_WAREHOUSE"])


def land_clicks(day: str, part: int) -> None:
    folder = Path(os.environ["LANDING_ROOT"]) / "clicks" / f"dt={day}"
    folder.mkdir(parents=True, exist_ok=True)
    start = dt_.datetime.fromisoformat(day)
    pq.write_table(pa.table({"ts": pa.array([start + dt_.timedelta(minutes=part)], pa.timestamp("us")),
                             "url": [f"/p{part}"]}), folder / f"part-{part}.parquet")


def run(defs: dg.Definitions, instance: dg.DagsterInstance, job: str, request: dg.RunRequest | None = None,
        partition: str | None = None) -> dg.ExecuteInProcessResult:
    result = defs.resolve_job_def(job).execute_in_process(
        instance=instance, partition_key=partition or (request.partition_key if request else None),
        run_config=request.run_config if request else None, tags=request.tags if request else None)
    assert result.success
    return result


def load_refusal(project: Path) -> list[str]:
    """The messages of the error the project's load fails with (see ``causes_of``)."""
    with pytest.raises(Exception) as raised:
        dg.load_from_defs_folder(path_within_project=project)
    return causes_of(raised.value)


def test_the_project_passes_the_dg_and_dagster_checks(project: Path) -> None:
    for args, said in ((("dg", "check", "yaml"), "All component YAML validated successfully"),
                       (("dg", "check", "defs"), "All definitions loaded successfully"),
                       (("dagster", "definitions", "validate", "-m", "teams.definitions"), "Validation successful")):
        done = command(project, *args)
        assert done.returncode == 0 and said in done.stdout + done.stderr, done.stdout + done.stderr


def test_every_table_is_ingested_compacted_and_maintained(project: Path, instance: dg.DagsterInstance) -> None:
    defs = importlib.import_module("teams.definitions").defs
    jobs = {job.name for job in defs.resolve_all_job_defs()}
    for table in TABLES:
        assert {names.ingestion_job(table), names.compaction_job(table), names.full_compaction_job(table),
                names.expire_job(table), names.orphans_job(table)} <= jobs
    catalog = catalog_of("web.clicks")

    # Two commits in one partition of each table: the compaction triggers (2) are reached.
    for part in range(2):
        land_clicks(DAY, part)
        run(defs, instance, names.ingestion_job("web.clicks"), partition=DAY)
        run(defs, instance, names.ingestion_job("crm.customers"), partition=DAY)
        run(defs, instance, names.ingestion_job("finance.ledger"), partition=DAY)
        run(defs, instance, names.ingestion_job("archive.visits"), partition=DAY)
    assert catalog.get_table("web.clicks").read().num_rows == 2  # the day's files, upserted: 1, then 2
    assert catalog.get_table("crm.customers").read().num_rows == 3
    assert catalog.get_table("finance.ledger").read().num_rows == 4
    # The archive's table is in its own warehouse only.
    assert catalog_of("archive.visits").get_table("archive.visits").read().num_rows == 3
    assert "archive" not in catalog.list_databases()

    for table in TABLES:
        with dg.build_sensor_context(instance=instance, definitions=defs, resources=defs.resources) as context:
            tick = defs.resolve_sensor_def(names.compaction_sensor(table)).evaluate_tick(context)
        [request] = tick.run_requests or []
        assert request.job_name == names.compaction_job(table)
        compacted = run(defs, instance, request.job_name, request)
        assert compacted.dagster_run.tags[COMPACTION_TAG] == table
        assert catalog_of(table).get_table(table).lsm_state().max_level0_files <= 1

        for schedule_name in (names.expire_schedule(table), names.orphans_schedule(table)):
            schedule = defs.resolve_schedule_def(schedule_name)
            with dg.build_schedule_context(instance=instance, resources=defs.resources) as context:
                [request] = schedule.evaluate_tick(context).run_requests or []
            run(defs, instance, schedule.job_name, request)


@pytest.mark.parametrize(("variable", "where"), [("LANDING_ROOT", "web/defs.yaml: tables[0].ingestion.landing.path"),
                                                 ("PAIMON_WAREHOUSE", "defs.yaml: warehouse")])
def test_an_unset_environment_variable_fails_the_load_naming_it(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                                variable: str, where: str) -> None:
    monkeypatch.delenv(variable)

    causes = load_refusal(project)
    text = "\n".join(causes)
    assert f"{where}: environment variable {variable} is not set" in text, text
    assert not list(project.rglob("None")), "nothing is created under a path named None"


def test_a_second_warehouse_without_a_name_of_its_own_is_refused_naming_both(project: Path) -> None:
    archive = project / "teams" / "defs" / "archive" / "defs.yaml"
    archive.write_text(archive.read_text().replace("  catalog_name: archive\n", ""))

    causes = load_refusal(project)
    [said] = {c for c in causes if "binds warehouse" in c}
    assert str(archive) in said and ("web/defs.yaml" in said or "crm/defs.yaml" in said), said
    assert "give one of them a catalog_name of its own" in said


def test_an_empty_warehouse_in_python_is_refused_by_name() -> None:
    from pipelines import paimon_definitions
    from pipelines.errors import TableDefinitionError

    refusal = "warehouse is empty.*is the environment variable it comes from set"
    with pytest.raises(TableDefinitionError, match=refusal) as raised:
        paimon_definitions([], warehouse=os.environ.get("PAIMON_UNSET_WAREHOUSE", ""))
    assert raised.value.field == "warehouse"


def test_dg_lists_the_component_and_scaffolds_one_that_loads_as_it_is(tmp_path: Path, instance: dg.DagsterInstance,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "fresh_project"
    for path in ("pyproject.toml", "teams/__init__.py", "teams/definitions.py", "teams/defs/__init__.py"):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(FILES[path])
    listed = command(root, "dg", "list", "components")
    assert "pipelines.component.PaimonTables" in listed.stdout, listed.stdout + listed.stderr

    scaffolded = command(root, "dg", "scaffold", "defs", "pipelines.component.PaimonTables", "team-a")
    assert scaffolded.returncode == 0, scaffolded.stdout + scaffolded.stderr
    for check in (("dg", "check", "yaml"), ("dg", "check", "defs")):
        done = command(root, *check)
        assert done.returncode == 0, done.stdout + done.stderr

    # Unchanged, it ingests the files landed in the project for its example table.
    monkeypatch.syspath_prepend(str(root))
    try:
        defs = dg.load_from_defs_folder(path_within_project=root)
        folder = root / "landing" / "events" / "dt=2024-01-01"
        folder.mkdir(parents=True)
        pq.write_table(pa.table({"ts": pa.array([dt_.datetime(2024, 1, 1, 9)], pa.timestamp("us")), "name": ["a"]}),
                       folder / "part-0.parquet")
        with dg.build_sensor_context(instance=instance, definitions=defs, resources=defs.resources) as context:
            [request] = defs.resolve_sensor_def(names.landing_sensor("team_a.events")).evaluate_tick(
                context).run_requests or []
        run(defs, instance, names.ingestion_job("team_a.events"), request)
    finally:
        for module in [m for m in sys.modules if m.split(".")[0] == "teams"]:
            del sys.modules[module]
    assert pc.Catalog(str(root / "warehouse")).get_table("team_a.events").read().num_rows == 1


def test_a_misspelt_field_is_named_at_its_line_with_the_field_meant(project: Path) -> None:
    crm = project / "teams" / "defs" / "crm" / "defs.yaml"
    text = crm.read_text().replace("      primary_key: [dt, id]", "      primary_keys: [dt, id]")
    crm.write_text(text.replace("function: ", "fucntion: "))

    causes = load_refusal(project)
    message = next(c for c in causes if "validation error" in c)
    lines = crm.read_text().splitlines()
    keys_line = next(i for i, line in enumerate(lines, 1) if "primary_keys" in line)
    function_line = next(i for i, line in enumerate(lines, 1) if "fucntion" in line)
    assert message.startswith("2 validation errors"), message
    assert f"attributes.tables.0.primary_keys at {crm}:{keys_line}" in message
    assert "unknown field primary_keys; did you mean primary_key?" in message
    assert f"attributes.tables.0.ingestion.fucntion at {crm}:{function_line}" in message
    assert "unknown field fucntion; did you mean function?" in message
    assert "valid string" not in message  # none of the template alternatives nobody wrote


def test_a_table_declared_in_two_folders_is_refused_naming_both(project: Path) -> None:
    crm = project / "teams" / "defs" / "crm" / "defs.yaml"
    again = project / "teams" / "defs" / "crm_copy" / "defs.yaml"
    again.parent.mkdir()
    again.write_text(crm.read_text())

    causes = load_refusal(project)
    [said] = {c for c in causes if "is declared twice" in c}
    assert "table crm.customers is declared twice" in said and str(crm) in said and str(again) in said


def test_a_table_declared_in_yaml_and_in_python_is_refused_naming_both(project: Path) -> None:
    """Both orders of the defs folder: the Python file loaded after the YAML, and before it."""
    crm = project / "teams" / "defs" / "crm" / "defs.yaml"
    for name in ("zz_customers.py", "aa_customers.py"):
        python = project / "teams" / "defs" / name
        python.write_text(FILES["teams/defs/finance.py"].replace(
            '"finance.ledger", columns=(Column("dt", "STRING"), Column("amount", "BIGINT"))',
            '"crm.customers", columns=(Column("dt", "STRING NOT NULL"), Column("id", "BIGINT NOT NULL"))'))
        causes = load_refusal(project)
        [said] = {c for c in causes if "is declared twice" in c}
        assert "table crm.customers is declared twice" in said and str(crm) in said and str(python) in said, said
        python.unlink()


def test_dg_check_yaml_refuses_a_value_no_field_takes(project: Path) -> None:
    """The schema lists the values of the enumerated fields (a template still passes), so `dg check
    yaml` (and so `dg check defs`) refuses what the load would, before anything is imported.
    (dagster-dg-cli 1.13.27 checks one file per component type, the last it finds, when given no
    path: every folder carries the mistake here, so whichever it checks is refused; given a
    folder, it checks that folder's file, which is how the reference says to check each.)"""
    declared = sorted((project / "teams" / "defs").rglob("defs.yaml"))
    for path in declared:
        path.write_text(path.read_text().replace("mode: upsert", "mode: merge"))

    checked = command(project, "dg", "check", "yaml")
    loaded = command(project, "dg", "check", "defs")

    assert checked.returncode != 0 and "defs.yaml" in checked.stdout + checked.stderr
    assert loaded.returncode != 0
    one_folder = command(project, "dg", "check", "yaml", "teams/defs/crm")
    assert one_folder.returncode != 0 and "crm/defs.yaml" in one_folder.stdout + one_folder.stderr
    for path in declared:
        path.write_text(path.read_text().replace("mode: merge", "mode: \"{{ env.MODE or 'upsert' }}\""))
    assert command(project, "dg", "check", "yaml").returncode == 0  # a template is checked when it loads

"""Changes consumers get correct changes or are refused: at load when the source is declared
beside them, at the first run (and in their sensor, with the same words) when it is not.

A consumer that keeps sums (devices per status) needs merged rows with -U before-images: a
partial-update source with ``changelog-producer: input`` hands it the rows as written, so a
device that changes status is counted under both; with ``lookup`` the sums are exact.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pac
import pytest

import paimon_core as pc
from pipelines import Column, Ingestion, PaimonTableSpec, names, paimon_definitions
from pipelines.compaction.jobs import compaction_run_config, compaction_tags
from pipelines.errors import TableDefinitionError
from tests.support.dagster_runs import metadata_of, one_line_failure

STATUS = "plant.device_status"
COUNTS = "plant.status_counts"
COUNTS_JOB = names.ingestion_job("plant.status_counts")
COUNTS_SENSOR = names.changes_sensor("plant.status_counts")
STATUS_JOB = names.ingestion_job("plant.device_status")
UPDATES: list[pd.DataFrame] = []


def device_updates(context: dg.AssetExecutionContext) -> pd.DataFrame:
    """Partial rows: the status of some devices (their battery is left as it was)."""
    return UPDATES.pop(0)


def status_deltas(changes: pa.Table) -> pa.Table:
    """+1 for a device entering a status (+I/+U), -1 for one leaving it (-U/-D)."""
    leaving = pac.is_in(changes.column("_row_kind"), value_set=pa.array(["-U", "-D"]))
    return pa.table({"status": changes.column("status"),
                     "delta": pac.if_else(leaving, pa.scalar(-1, pa.int64()), pa.scalar(1, pa.int64()))})


def status_spec(producer: str = "lookup", engine: str = "partial-update") -> PaimonTableSpec:
    return PaimonTableSpec(
        STATUS, columns=(Column("device", "STRING NOT NULL"), Column("status", "STRING"), Column("battery", "DOUBLE")),
        primary_key=("device",),
        options={"bucket": "1", "merge-engine": engine, "changelog-producer": producer},
        ingestion=Ingestion(mode="upsert", function=device_updates))


def counts_spec(source: str = STATUS, change_columns: tuple[str, ...] = ("status",)) -> PaimonTableSpec:
    return PaimonTableSpec(
        COUNTS, columns=(Column("status", "STRING"), Column("delta", "BIGINT")), options={"bucket": "-1"},
        ingestion=Ingestion(mode="append", changes_of=source, function=status_deltas, change_columns=change_columns))


@pytest.mark.parametrize(("producer", "engine", "said"), [
    ("input", "partial-update", "partial rows as written"),
    ("input", "aggregation", "the addends as written"),
    ("none", "first-row", "repeated keys included"),
    ("none", "partial-update", "partial rows as written"),
    ("none", "deduplicate", "the rows each commit wrote"),
])
def test_a_source_without_merged_before_images_is_refused_at_load(tmp_path: Path, producer: str, engine: str,
                                                                   said: str) -> None:
    with pytest.raises(TableDefinitionError) as refused:
        paimon_definitions([status_spec(producer, engine), counts_spec()], warehouse=str(tmp_path))
    message = str(refused.value)
    assert message.startswith(f"table {COUNTS}: ingestion.changes_of: its source {STATUS} has changelog-producer "
                              f"{producer}")
    assert said in message and "without -U before-images" in message
    assert "'lookup' or 'full-compaction'" in message


def test_sources_with_merged_changes_load(tmp_path: Path) -> None:
    for producer, engine in (("lookup", "partial-update"), ("full-compaction", "aggregation"),
                             ("input", "deduplicate"), ("lookup", "first-row")):
        paimon_definitions([status_spec(producer, engine), counts_spec()], warehouse=str(tmp_path))


def test_a_typo_and_unknown_change_columns_are_refused_at_load(tmp_path: Path) -> None:
    with pytest.raises(TableDefinitionError, match=rf"table {COUNTS}: ingestion.changes_of: there is no table "
                                                   rf"plant.device_statuz; did you mean {STATUS}\?"):
        paimon_definitions([status_spec(), counts_spec("plant.device_statuz")], warehouse=str(tmp_path))
    with pytest.raises(TableDefinitionError, match=rf"table {COUNTS}: ingestion.change_columns: \['state'\] are not "
                                                   rf"columns of its source {STATUS} \(device, status, battery\)"):
        paimon_definitions([status_spec(), counts_spec(change_columns=("state",))], warehouse=str(tmp_path))
    # A source nobody here declares is another code location's (or engine's): checked at its first run.
    paimon_definitions([counts_spec("erp.devices")], warehouse=str(tmp_path))


def test_a_source_declared_elsewhere_is_checked_at_the_first_run(tmp_path: Path,
                                                                 instance: dg.DagsterInstance) -> None:
    defs = paimon_definitions([counts_spec()], warehouse=str(tmp_path))
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("plant", exist_ok=True)
    spec = status_spec("input")
    source = catalog.create_table(STATUS, schema=spec.arrow_schema(), primary_keys=["device"],
                                  options=spec.table_options())
    source.write(pa.table({"device": ["d1"], "status": ["ok"], "battery": [0.9]}, schema=spec.arrow_schema()))
    with pytest.raises(TableDefinitionError) as at_load:
        paimon_definitions([spec, counts_spec()], warehouse=str(tmp_path))

    with dg.build_sensor_context(instance=instance, definitions=defs, resources=defs.resources) as context:
        tick = defs.resolve_sensor_def(COUNTS_SENSOR).evaluate_tick(context)
    assert tick.skip_message == str(at_load.value), "the sensor says what the load would have said"
    result = defs.resolve_job_def(COUNTS_JOB).execute_in_process(instance=instance, raise_on_error=False)
    assert one_line_failure(result) == str(at_load.value)
    assert not catalog.table_exists(COUNTS) or catalog.get_table(COUNTS).latest_snapshot() is None

    typo = paimon_definitions([counts_spec("plant.device_statuz")], warehouse=str(tmp_path))
    result = typo.resolve_job_def(COUNTS_JOB).execute_in_process(instance=instance, raise_on_error=False)
    assert one_line_failure(result).endswith(f"there is no table plant.device_statuz; did you mean {STATUS}?")


def run(defs: dg.Definitions, instance: dg.DagsterInstance, job: str, **kwargs: Any) -> dg.ExecuteInProcessResult:
    result = defs.resolve_job_def(job).execute_in_process(instance=instance, **kwargs)
    assert result.success
    return result


def test_a_lookup_source_feeds_exact_counts(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    """Four devices change status over five upserts of partial rows; compaction surfaces the
    merged changes, the consumer folds them: its sums per status are the source's counts."""
    specs = [status_spec("lookup"), counts_spec()]
    defs = paimon_definitions(specs, warehouse=str(tmp_path))
    catalog = pc.Catalog(str(tmp_path))
    UPDATES[:] = [
        pd.DataFrame({"device": ["d1", "d2", "d3", "d4"], "status": ["ok", "ok", "ok", "ok"],
                      "battery": [0.9, 0.8, 0.7, 0.6]}),
        pd.DataFrame({"device": ["d1", "d2"], "status": ["low", "low"]}),
        pd.DataFrame({"device": ["d1"], "status": ["ok"]}),
        pd.DataFrame({"device": ["d3", "d4", "d3"], "status": ["offline", "low", "low"]}),
        pd.DataFrame({"device": ["d2"], "battery": [0.1]}),  # no status: partial row
    ]
    for step in range(len(UPDATES)):
        run(defs, instance, STATUS_JOB)
        if step % 2 == 1:  # the changes surface when compaction pushes level 0 up
            run(defs, instance, names.compaction_job(STATUS), run_config=compaction_run_config(specs[0].target()),
                tags=compaction_tags(STATUS))
        run(defs, instance, COUNTS_JOB)
    run(defs, instance, names.compaction_job(STATUS), run_config=compaction_run_config(specs[0].target()),
        tags=compaction_tags(STATUS))
    last = run(defs, instance, COUNTS_JOB)

    # The consumer's asset is unpartitioned: its materialization counts the table, not a partition.
    written = metadata_of(last, counts_spec().key)
    assert written["dagster/row_count"] == catalog.get_table(COUNTS).read().num_rows
    assert "dagster/partition_row_count" not in written
    source = catalog.get_table(STATUS).read()
    assert source.num_rows == 4
    truth = Counter(source.column("status").to_pylist())
    assert truth == Counter({"low": 3, "ok": 1})
    sums: Counter[str] = Counter()
    for row in catalog.get_table(COUNTS).read().to_pylist():
        sums[row["status"]] += row["delta"]
    assert +sums == truth, "each device counted once, under its current status"

"""Reference tests of the pure parts of a table declaration: the spec's validation, the partition
mapping, the YAML component's models and the landing template's matching."""

from __future__ import annotations

import datetime as dt_
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from pipelines import names
from pipelines.component import table_spec
from pipelines.errors import TableDefinitionError
from pipelines.spec.declaration import PaimonTableSpec
from pipelines.spec.parts import Column, Compaction, DataChecks, Ingestion, Input, Maintenance, Partitions
from resources.landing_location import LandingLocation, template_regex
from resources.partition_mapping import PartitionMapping, PartitionMappingError, static_mapping, time_mapping
from resources.writes import InputPolicy

COLUMNS = (Column("dt", "STRING NOT NULL"), Column("id", "BIGINT NOT NULL"), Column("name", "VARCHAR(20)"),
           Column("amount", "DECIMAL(12, 2)"))
DAYS = Partitions("daily", start="2024-01-01", end="2024-01-08")


def source(context: Any) -> pa.Table:
    return pa.table({"id": [1]})


def spec(**changes: Any) -> PaimonTableSpec:
    fields: dict[str, Any] = {"table": "crm.customers", "columns": COLUMNS, "primary_key": ("dt", "id"),
                              "partition_keys": ("dt",), "partitions": DAYS,
                              "ingestion": Ingestion(mode="upsert", function=source)}
    return PaimonTableSpec(**{**fields, **changes})


def test_a_valid_spec_and_what_it_derives() -> None:
    declared = spec(asset_key=("lake", "crm", "customers"))
    assert declared.key.path == ["lake", "crm", "customers"]
    assert declared.name == "crm_customers" and declared.group_name == "crm"
    assert declared.table_options()["write-only"] == "true"
    schema = declared.arrow_schema()
    assert schema.field("amount").type == pa.decimal128(12, 2)
    assert not schema.field("id").nullable
    mapping = declared.partition_mapping()
    assert mapping is not None and mapping.values("2024-01-03") == {"dt": "2024-01-03"}


def test_a_freshness_window_becomes_the_assets_freshness_policy() -> None:
    assert spec().ingestion.freshness_policy() is None  # type: ignore[union-attr]
    policy = spec(ingestion=Ingestion(mode="upsert", function=source, fresh_within="26 h",
                                      warn_within="90 min")).ingestion.freshness_policy()  # type: ignore[union-attr]
    assert policy == dg.FreshnessPolicy.time_window(fail_window=dt_.timedelta(hours=26),
                                                    warn_window=dt_.timedelta(minutes=90))


def test_default_asset_key_is_database_and_table() -> None:
    assert spec().key.path == ["crm", "customers"]


def test_an_arrow_schema_is_accepted_as_columns() -> None:
    declared = spec(columns=pa.schema([pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False)]))
    assert [c.name for c in declared.column_list] == ["dt", "id"]


@pytest.mark.parametrize(("changes", "message"), [
    ({"columns": (Column("dt", "STRNG"), Column("id", "BIGINT"))}, "STRNG"),
    ({"primary_key": ("dt", "customer")}, "customer"),
    ({"options": {"bucket": "two"}}, "bucket"),
    ({"options": {"merge-engine": "dedup"}}, "merge-engine"),
    ({"partitions": Partitions("daily")}, "partitions.start"),
    ({"partitions": Partitions("yearly", start="2024-01-01")}, "partitions.kind"),
    ({"partitions": Partitions("daily", start="2024-01-01", mapping={"dt": "%Y-%m"})}, "same Paimon partition"),
    ({"partitions": Partitions("daily", start="2024-01-01", mapping={"day": "%Y-%m-%d"})}, "not partition keys"),
    ({"partition_keys": (), "primary_key": ("id",)}, "no partition_keys"),
    ({"ingestion": Ingestion(mode="merge", function=source)}, "ingestion.mode"),
    ({"ingestion": Ingestion(mode="upsert")}, "exactly one of function"),
    ({"ingestion": Ingestion(mode="upsert", function="no_such_module:f")}, "cannot import"),
    ({"ingestion": Ingestion(mode="append", landing=LandingLocation("/x/dt={partition}/*.parquet"))},
     "overwrite"),
    ({"ingestion": Ingestion(mode="upsert", landing=LandingLocation("/x/*.parquet"))}, "{partition}"),
    ({"compaction": Compaction(level0_threshold=2)}, "below the table's compaction trigger"),
    ({"compaction": Compaction(job="major")}, "compaction.job"),
    ({"maintenance": Maintenance(expire_cron="every hour")}, "maintenance.expire_cron"),
    ({"maintenance": Maintenance(retain_min=30, retain_max=10)}, "retain_min"),
    ({"checks": DataChecks(not_null=("nme",))}, "checks.not_null"),
    ({"asset_key": ("lake", "")}, "asset_key"),
    ({"ingestion": Ingestion(mode="upsert", function=source, executor="kubernetes")}, "ingestion.executor"),
    ({"ingestion": Ingestion(mode="upsert", function=source, extra_columns="drop")}, "ingestion.extra_columns"),
    ({"ingestion": Ingestion(mode="upsert", function=source, fresh_within="a day")},
     "ingestion.fresh_within: 'a day' has no recognised unit"),
    ({"ingestion": Ingestion(mode="upsert", function=source, fresh_within="30 s")},
     "ingestion.fresh_within: '30 s' is under a minute"),
    ({"ingestion": Ingestion(mode="upsert", function=source, warn_within="1 h")},
     "ingestion.warn_within: given without ingestion.fresh_within"),
    ({"ingestion": Ingestion(mode="upsert", function=source, fresh_within="1 h", warn_within="60 min")},
     "ingestion.warn_within: '60 min' is not shorter than fresh_within '1 h'"),
    ({"partitions": Partitions("daily", start="2024-01-01", timezone="Europe/Pariss")},
     "partitions.timezone: 'Europe/Pariss' is not a time zone; did you mean Europe/Paris?"),
])
def test_bad_declarations_name_the_table_and_the_field(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(TableDefinitionError) as error:
        spec(**changes)
    assert "crm.customers" in str(error.value)
    assert message in str(error.value)


@pytest.mark.parametrize(("table", "hint"), [("crm-eu.customers", "; e.g. crm_eu.customers"),
                                             ("customers", ""), ("crm.customers v2", "; e.g. crm.customers_v2")])
def test_a_table_name_dagster_cannot_name_definitions_after_is_refused(table: str, hint: str) -> None:
    with pytest.raises(TableDefinitionError) as error:
        spec(table=table)
    assert str(error.value).startswith(f"table {table}: table: {table!r} must be database.table")
    assert str(error.value).endswith(f"named after it){hint}") and error.value.field == "table"


def test_upsert_needs_a_primary_key() -> None:
    with pytest.raises(TableDefinitionError, match="upsert needs a primary key"):
        spec(primary_key=(), columns=COLUMNS)


def test_changes_consumers_append_to_unpartitioned_assets() -> None:
    consumer = spec(partitions=Partitions(), ingestion=Ingestion(mode="append", function=source,
                                                                 changes_of="shop.orders"))
    assert consumer.partitions_def() is None
    with pytest.raises(TableDefinitionError, match="unpartitioned"):
        spec(ingestion=Ingestion(mode="append", function=source, changes_of="shop.orders"))
    with pytest.raises(TableDefinitionError, match="drop landing and inputs"):
        spec(partitions=Partitions(), ingestion=Ingestion(mode="append", function=source, changes_of="a.b",
                                                          inputs={"x": Input(("a", "b"))}))


# ---- partition mapping ------------------------------------------------------------------------


def test_time_mapping_round_trips_and_filters() -> None:
    hourly = time_mapping({"dt": "%Y-%m-%d", "hh": "%H"}, "%Y-%m-%d-%H:%M",
                          ["2024-01-01-00:00", "2024-01-01-01:00"], table="t.t")
    assert hourly.values("2024-01-01-05:00") == {"dt": "2024-01-01", "hh": "05"}
    assert hourly.key_of({"dt": "2024-01-01", "hh": "05"}) == "2024-01-01-05:00"
    assert hourly.key_of({"dt": "2024-01-01"}) is None
    assert hourly.filter(["2024-01-01-05:00"]) == [("dt", "=", "2024-01-01"), ("hh", "=", "05")]
    assert hourly.filter(["2024-01-01-05:00", "2024-01-02-06:00"]) == [
        [("dt", "=", "2024-01-01"), ("hh", "=", "05")], [("dt", "=", "2024-01-02"), ("hh", "=", "06")]]
    assert PartitionMapping.from_json(hourly.to_metadata()) == hourly


def test_monthly_values_give_back_their_key() -> None:
    monthly = time_mapping({"month": "%Y-%m"}, "%Y-%m-%d", ["2024-01-01", "2024-02-01"], table="t.t")
    assert monthly.values("2024-02-01") == {"month": "2024-02"}
    assert monthly.key_of({"month": "2024-02"}) == "2024-02-01"


def test_a_coarser_pattern_is_refused() -> None:
    with pytest.raises(PartitionMappingError, match="same Paimon partition"):
        time_mapping({"dt": "%Y-%m"}, "%Y-%m-%d", ["2024-01-01", "2024-01-02"], table="t.t")


def test_static_and_legacy_mappings() -> None:
    regions = static_mapping("region")
    assert regions.values("eu") == {"region": "eu"} and regions.key_of({"region": "eu"}) == "eu"
    assert regions.filter(["eu", "us"]) == [("region", "in", ["eu", "us"])]
    assert PartitionMapping.from_metadata({"partition_expr": "dt"}) == static_mapping("dt")
    assert PartitionMapping.from_metadata({}) is None


# ---- YAML models and landing templates --------------------------------------------------------


def test_yaml_models_resolve_into_the_same_spec() -> None:
    declared = table_spec({
        "table": "crm.customers", "primary_key": ["dt", "id"], "partition_keys": ["dt"],
        "columns": [{"name": "dt", "type": "STRING NOT NULL"}, {"name": "id", "type": "BIGINT NOT NULL"},
                    {"name": "name", "type": "VARCHAR(20)"}, {"name": "amount", "type": "DECIMAL(12, 2)"}],
        "options": {"bucket": 2},
        "partitions": {"kind": "daily", "start": "2024-01-01", "end": "2024-01-08"},
        "ingestion": {"mode": "upsert", "function": "tests.unit.test_table_spec:source", "extra_columns": "ignore",
                      "allow_empty_partitions": True},
        "maintenance": {"enabled": False},
    })
    assert declared.ingestion is not None
    assert declared.ingestion.input_policy() == InputPolicy(extra_columns="ignore", allow_empty_partitions=True)
    assert declared.options == {"bucket": "2"}
    assert declared.maintenance.expire_cron is None and declared.maintenance.orphans_cron is None
    assert declared.arrow_schema() == spec(options={"bucket": "2"}).arrow_schema()


def test_landing_templates_match_their_files() -> None:
    shape = template_regex("s3://bucket/landing/dt={partition}/region={region}/*.parquet")
    match = shape.fullmatch("s3://bucket/landing/dt=2024-01-02/region=eu/part-0.parquet")
    assert match is not None and match.group("partition") == "2024-01-02"
    assert shape.fullmatch("s3://bucket/landing/dt=2024-01-02/part-0.parquet") is None
    nested = template_regex("/data/{partition}/**/*.csv")
    deep = nested.fullmatch("/data/2024-01-02/a/b/c.csv")
    assert deep is not None and deep.group("partition") == "2024-01-02"


def test_each_tables_ingestion_job_takes_its_executor(tmp_path: Any) -> None:
    import dagster as dg

    from pipelines.factory import paimon_definitions

    fast = spec()
    slow = spec(table="crm.accounts", ingestion=Ingestion(mode="upsert", function=source, executor="multiprocess"))
    defs = paimon_definitions([fast, slow], warehouse=str(tmp_path / "warehouse"))
    assert defs.resolve_job_def(names.ingestion_job("crm.customers")).executor_def is dg.in_process_executor
    assert defs.resolve_job_def(names.ingestion_job("crm.accounts")).executor_def is dg.multiprocess_executor
    # Materializations from the asset pages (the implicit asset job) run in-process too.
    assert defs.resolve_implicit_global_asset_job_def().executor_def is dg.in_process_executor


def test_every_yaml_field_carries_its_documentation() -> None:
    from pipelines.component import PaimonTables

    schema = PaimonTables.model().model_json_schema()
    models = [schema, *schema.get("$defs", {}).values()]
    fields = {(model.get("title"), name): body for model in models
              for name, body in model.get("properties", {}).items()}
    assert len(fields) > 70
    assert [key for key, body in fields.items() if not body.get("description")] == []


def test_a_refused_yaml_field_is_reported_at_its_line() -> None:
    text = ("table: crm.customers\n"
            "columns:\n"
            "  - {name: dt, type: STRING NOT NULL}\n"
            "  - {name: id, type: BIGINT NOT NULL}\n"
            "primary_key: [dt, id]\n"
            "partition_keys: [dt]\n"
            "partitions: {kind: daily, start: 2024-01-01}\n"
            "ingestion:\n"
            "  function: tests.unit.test_table_spec:source\n"
            "  mode: merge\n")
    with pytest.raises(Exception, match=r"(?s):10 - ingestion\.mode.*ingestion\.mode: 'merge' is not one of"):
        PaimonTableSpec.resolve_from_yaml(text)
    with pytest.raises(Exception, match=r"(?s):3 - columns\.0.*columns\[0\] \(dt\): .*STRNG"):
        PaimonTableSpec.resolve_from_yaml(text.replace("mode: merge", "mode: upsert")
                                          .replace("STRING NOT", "STRNG NOT"))


def test_yaml_dates_numbers_and_booleans_read_as_the_text_a_user_means() -> None:
    declared = PaimonTableSpec.resolve_from_yaml(
        "table: crm.t\ncolumns: [{name: dt, type: STRING}, {name: id, type: BIGINT}]\npartition_keys: [dt]\n"
        "primary_key: [dt, id]\n"
        "options: {bucket: 2, write-only: true, deletion-vectors.enabled: false}\n"
        "partitions: {kind: daily, start: 2024-01-01, end: 2024-01-08}\n")
    assert declared.options == {"bucket": "2", "write-only": "true", "deletion-vectors.enabled": "false"}
    assert (declared.partitions.start, declared.partitions.end) == ("2024-01-01", "2024-01-08")

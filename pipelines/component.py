"""``PaimonTables``: the Dagster Component that declares Paimon tables in a ``defs.yaml``.

.. code-block:: yaml

    type: pipelines.component.PaimonTables
    attributes:
      warehouse: "{{ env.PAIMON_WAREHOUSE }}"
      tables:
        - table: crm.customers
          asset_key: [lake, crm, customers]
          columns:
            - {name: id, type: BIGINT, description: The customer's id}
            - {name: name, type: STRING}
            - {name: dt, type: STRING}
          primary_key: [dt, id]
          partition_keys: [dt]
          partitions: {kind: daily, start: 2024-01-01}
          ingestion: {mode: upsert, function: my_project.sources:customers}

Every field is a field of ``PaimonTableSpec`` (``pipelines.spec.declaration``) spelled the same way, with
column types as Paimon / SQL type names; ``{{ env.X }}`` templates are resolved when the
component loads. Each table becomes a spec, checked as the Python API checks it, and
``paimon_definitions`` builds the rest, so a table declared here gets everything a table
declared in Python gets.
"""

# No `from __future__ import annotations`: Dagster derives the YAML schema from these
# annotations as real types.

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import dagster as dg
from pydantic import BaseModel

from pipelines.errors import TableDefinitionError
from pipelines.executors import executor_named
from pipelines.factory import paimon_definitions
from pipelines.spec.declaration import PaimonTableSpec
from pipelines.spec.declared_once import check_declared_once
from pipelines.spec.environment import unset_variables
from pipelines.spec.parts import (
    BACKFILL_POLICIES,
    FAN_OUTS,
    Column,
    Compaction,
    DataChecks,
    Ingestion,
    Maintenance,
    Partitions,
)
from pipelines.spec.scaffold import PaimonTablesScaffolder
from pipelines.spec.validation import COMPACTION_JOBS, PARTITION_KINDS, typo_of
from pipelines.spec.yaml_errors import hinted_model
from pipelines.spec.yaml_forms import doc
from resources import keys
from resources.landed_files import EXTRA_COLUMNS
from resources.landing_location import FORMATS, LandingLocation
from resources.writes import WRITE_MODES

# The values text fields may take, for the JSON schema `dg check yaml` validates against.
CHOICES = {("IngestionModel", "mode"): WRITE_MODES, ("IngestionModel", "extra_columns"): EXTRA_COLUMNS,
           ("IngestionModel", "backfill_policy"): BACKFILL_POLICIES, ("IngestionModel", "fan_out"): FAN_OUTS,
           ("PartitionsModel", "kind"): PARTITION_KINDS, ("CompactionModel", "job"): COMPACTION_JOBS,
           ("LandingLocationModel", "format"): FORMATS}


# The dataclasses of the YAML schema, whose fields a misspelt field is matched against.
SCHEMA_CLASSES = (PaimonTableSpec, Column, Partitions, Ingestion, Compaction, Maintenance, DataChecks, LandingLocation)


@dg.scaffold_with(PaimonTablesScaffolder)
@dataclass
class PaimonTables(dg.Component, dg.Resolvable):
    """Paimon tables declared in YAML, each with its asset, ingestion, compaction and maintenance."""

    warehouse: Annotated[str, doc("Warehouse root: an absolute path, file:// URI or fsspec URL "
                                  "(s3://bucket/warehouse); a relative path is the project's.")]
    tables: Annotated[Sequence[PaimonTableSpec], doc("The tables, each as a PaimonTableSpec.")]
    storage_options: Annotated[Mapping[str, str], doc(
        "fsspec options of the warehouse (for S3: endpoint_url, key, secret ...); use {{ env.X }} for "
        "secrets.")] = field(default_factory=dict)
    executor: Annotated[str | None, doc(
        "The executor of the compaction and maintenance jobs and of tables naming none: in_process "
        "(default), multiprocess, dask, k8s, celery.")] = None
    executor_config: Annotated[Mapping[str, Any], doc("That executor's config (as in run config).")] = \
        field(default_factory=dict)
    catalog_name: Annotated[str | None, doc(
        "Where the code location holds tables of more than one warehouse, a name for this one: its resources "
        "are then paimon_catalog_<name> and paimon_io_manager_<name>.")] = None

    @classmethod
    def model(cls) -> type[BaseModel]:
        """The YAML schema, whose errors name the field at fault at its line (``yaml_errors``)."""
        fields_of = {f"{kind.__name__}Model": [f.name for f in dataclasses.fields(kind)]
                     for kind in (cls, *SCHEMA_CLASSES)}
        return hinted_model(dg.Resolvable.model.__func__(cls), fields_of, typo_of, CHOICES)  # type: ignore[attr-defined]

    @classmethod
    def load(cls, attributes: BaseModel | None, context: dg.ComponentLoadContext) -> "PaimonTables":
        """Refuse a bare ``{{ env.X }}`` of an unset variable before Dagster renders it as nothing."""
        raw = attributes.model_dump(exclude_unset=True) if attributes is not None else {}
        unset = list(unset_variables(raw, os.environ))
        if unset:
            where = context.path / "defs.yaml"
            raise TableDefinitionError(f"{where}: " + "; ".join(u.message() for u in unset), field=unset[0].field)
        return super().load(attributes, context)

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        warehouse = self.resolved_warehouse(context.project_root)
        check_declared_once(self.tables, context, context.path / "defs.yaml",
                            catalog_key=keys.catalog_key(self.catalog_name), warehouse=warehouse)
        executor = executor_named(self.executor, self.executor_config, table="(code location)", field="executor") \
            if self.executor else None
        return paimon_definitions(list(self.tables), warehouse=warehouse, storage_options=self.storage_options,
                                  executor=executor, catalog_name=self.catalog_name)

    def resolved_warehouse(self, project_root: Path) -> str:
        """A relative path is the project's: the webserver, daemon and run workers may start in
        different directories and must all see the same tables."""
        text = self.warehouse.strip()
        if not text:
            raise TableDefinitionError("PaimonTables: warehouse is empty (is the environment variable of its "
                                       "{{ env.X }} template set?)")
        if "://" in text or Path(text).is_absolute():
            return text
        return str((project_root / text).resolve())


def table_spec(entry: Mapping[str, Any]) -> PaimonTableSpec:
    """One table entry of a ``defs.yaml`` (its ``attributes.tables`` list), as the component reads it."""
    spec: PaimonTableSpec = PaimonTableSpec.resolve_from_dict(dict(entry))
    return spec

"""A Paimon table as a Dagster user declares it: one frozen, validated value per table.

Everything the integration builds for a table (asset, ingestion job, compaction sensor,
maintenance schedules, checks) comes from its ``PaimonTableSpec`` and nothing else: there is no
registry of tables anywhere. The spec is also the YAML component's schema (a Dagster
``Resolvable``: each table entry of a ``defs.yaml`` resolves into it), so both ways of declaring
a table are checked by the same code when definitions load, with errors
(``TableDefinitionError``) that name the table and the field, and in YAML its line.
"""

# No `from __future__ import annotations`: Dagster derives the YAML schema from these
# annotations as real types.

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

import dagster as dg
import pyarrow as pa
from dagster.components.resolved.errors import ResolutionException
from pydantic import BaseModel

import paimon_core as pc
from paimon_core.errors import PaimonError
from pipelines import names
from pipelines.errors import TableDefinitionError, fail
from pipelines.spec.parts import Column, Compaction, DataChecks, Ingestion, Maintenance, Partitions
from pipelines.spec.validation import (
    check_change_feeds,
    check_checks,
    check_compaction,
    check_ingestion,
    check_maintenance,
    check_name,
    check_partitions,
    check_threshold,
)
from pipelines.spec.yaml_forms import columns_field, doc, options_field
from pipelines.target import TableTarget, follow_seconds
from resources.partition_mapping import (
    PartitionMapping,
    static_mapping,
    time_mapping,
)

# The Paimon value of a time partition when the spec does not say: the window start, as fine
# as the partitions.
DEFAULT_PATTERNS = {"daily": "%Y-%m-%d", "hourly": "%Y-%m-%d %H:00", "weekly": "%Y-%m-%d", "monthly": "%Y-%m"}
# Options every table of the integration gets unless its spec says otherwise: writers that
# only add files, compacted by the dedicated jobs (the compaction sensor), expired by the
# maintenance schedules.
DEDICATED_COMPACTION_OPTIONS = {"write-only": "true"}


@dataclass(frozen=True, slots=True)
class PaimonTableSpec(dg.Resolvable):
    """A Paimon table, its Dagster asset and what keeps the table in shape."""

    table: Annotated[str, doc("db.table")]
    columns: Annotated[tuple[Column, ...] | pa.Schema, columns_field(
        Column, "The table's columns, in order (in Python an Arrow schema too).")]
    primary_key: Annotated[tuple[str, ...], doc("The primary-key columns (none: an append table).")] = ()
    partition_keys: Annotated[tuple[str, ...], doc("The Paimon partition columns.")] = ()
    options: Annotated[Mapping[str, str], options_field(
        "Paimon table options (bucket, merge-engine, changelog-producer ...); with the compaction sensor on, "
        "write-only is added (the sensor's jobs compact).")] = field(default_factory=dict)
    asset_key: Annotated[tuple[str, ...], doc("The asset's key, of any length (default [db, table]).")] = ()
    group: Annotated[str | None, doc("The asset's group (default the database).")] = None
    description: Annotated[str | None, doc("The asset's and the table's description.")] = None
    owners: Annotated[tuple[str, ...], doc("The asset's owners (emails or team:name).")] = ()
    tags: Annotated[Mapping[str, str], doc("The asset's tags.")] = field(default_factory=dict)
    partitions: Annotated[Partitions, doc("The asset's partitions.")] = field(default_factory=Partitions)
    ingestion: Annotated[Ingestion | None, doc(
        "Where the rows come from (none: a table written elsewhere, shown, compacted and "
        "maintained).")] = None
    compaction: Annotated[Compaction, doc("Its dedicated compaction.")] = field(default_factory=Compaction)
    maintenance: Annotated[Maintenance, doc("Its snapshot expiry and orphan cleanup.")] = \
        field(default_factory=Maintenance)
    consumers: Annotated[tuple[str, ...], doc(
        "Ids of consumers of the table's changes, shown with its retention (expiry keeps their unread "
        "snapshots).")] = ()
    checks: Annotated[DataChecks | None, doc("Rules each written partition must meet.")] = None

    @classmethod
    def resolve_from_model(cls, context: dg.ResolutionContext, model: BaseModel) -> "PaimonTableSpec":
        """A table entry of a ``defs.yaml``; a refused declaration is reported at the line of the
        field it names (or of the entry)."""
        try:
            # (no zero-argument super() in a slots dataclass: the decorator makes a new class)
            resolved: PaimonTableSpec = dg.Resolvable.resolve_from_model.__func__(cls, context, model)  # type: ignore[attr-defined]
            return resolved
        except TableDefinitionError as exc:
            raise ResolutionException(located(context, exc)) from None

    def __post_init__(self) -> None:
        columns = self.columns
        if isinstance(columns, pa.Schema):
            described = [(f, (f.metadata or {}).get(b"description")) for f in columns]
            columns = tuple(Column(f.name, f.type, d.decode() if d else None, f.nullable) for f, d in described)
        object.__setattr__(self, "columns", tuple(columns))
        for name in ("primary_key", "partition_keys", "asset_key", "owners", "consumers"):
            value = getattr(self, name)
            object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(value))
        if not self.asset_key:
            object.__setattr__(self, "asset_key", tuple(self.table.split(".", 1)))
        self.validate()

    # ---- derived values -------------------------------------------------------------------

    @property
    def key(self) -> dg.AssetKey:
        return dg.AssetKey(list(self.asset_key))

    @property
    def name(self) -> str:
        """``db_table``: the suffix of the names of the table's jobs, sensors and schedules."""
        return names.suffix(self.table)

    @property
    def database(self) -> str:
        return self.table.split(".", 1)[0]

    @property
    def group_name(self) -> str:
        return self.group or self.database

    @property
    def column_list(self) -> tuple[Column, ...]:
        assert isinstance(self.columns, tuple)
        return self.columns

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([column.arrow_field() for column in self.column_list])

    def table_options(self) -> dict[str, str]:
        """The options the table is created with (and its reconciled options brought to)."""
        options = {str(k): str(v) for k, v in self.options.items()}
        if self.compaction.sensor:
            options = {**DEDICATED_COMPACTION_OPTIONS, **options}
        return options

    @property
    def full_compactions(self) -> bool:
        """Whether level 0 reaching the threshold launches full compactions: asked for, or the
        table's changelog comes from them (``changelog-producer = full-compaction``)."""
        return self.compaction.job == "full" or self.table_options().get("changelog-producer") == "full-compaction"

    @property
    def full_compaction_every(self) -> int | None:
        """``full-compaction.delta-commits``: data commits between scheduled full compactions."""
        value = self.table_options().get("full-compaction.delta-commits")
        return int(value) if value else None

    def partitions_def(self) -> dg.PartitionsDefinition | None:
        return self.partitions.definition()

    def partition_mapping(self) -> PartitionMapping | None:
        """Dagster key to Paimon partition values (None for an unpartitioned asset)."""
        kind = self.partitions.kind
        if kind == "none":
            return None
        columns = dict(self.partitions.mapping)
        if not columns and len(self.partition_keys) == 1:
            columns = {self.partition_keys[0]: "{key}" if kind == "static" else DEFAULT_PATTERNS[kind]}
        if kind == "static":
            return static_mapping(next(iter(columns)))
        definition = self.partitions_def()
        assert isinstance(definition, dg.TimeWindowPartitionsDefinition)
        return time_mapping(columns, definition.fmt, sample_keys(definition), table=self.table)

    def target(self) -> TableTarget:
        """What the compaction and maintenance runs of the table need to know about it."""
        return TableTarget(table=self.table, asset_key=self.key, mapping=self.partition_mapping(),
                           expire_cron=self.maintenance.expire_cron, orphans_cron=self.maintenance.orphans_cron,
                           level0_threshold=self.compaction.level0_threshold,
                           follow_seconds=follow_seconds(self.compaction.follow_seconds),
                           buckets_per_step=self.compaction.buckets_per_step, commit_once=self.compaction.commit_once)

    def with_options(self, **changes: Any) -> "PaimonTableSpec":
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    # ---- validation -------------------------------------------------------------------------

    def validate(self) -> None:
        """Refuse a declaration that cannot work, naming the field; nothing is written."""
        table = self.table
        check_name(self)
        if not self.column_list:
            raise fail(table, "columns", "no columns declared")
        for index, column in enumerate(self.column_list):
            try:
                column.arrow_field()
            except (PaimonError, ValueError, TypeError) as exc:
                raise fail(table, f"columns[{index}] ({column.name})", str(exc)) from None
        try:
            schema = self.arrow_schema()
            declared = pc.validate_table(table, schema=schema, partition_keys=self.partition_keys,
                                      primary_keys=self.primary_key, options=self.table_options(),
                                      comment=self.description)
        except TableDefinitionError:
            raise
        except PaimonError as exc:
            raise TableDefinitionError(f"table {table}: {exc}") from None
        check_threshold(self, declared.table_options())
        if any(not part for part in self.asset_key):
            raise fail(table, "asset_key", f"{list(self.asset_key)} has an empty part")
        check_partitions(self)
        check_ingestion(self)
        check_compaction(self)
        check_maintenance(self)
        check_checks(self)

    @property
    def fixed_buckets(self) -> bool:
        """A table with a fixed number of buckets (``bucket > 0``): its writers may take slices."""
        return int(self.table_options().get("bucket", "-1")) > 0

    @property
    def bucketless_append(self) -> bool:
        """An append table without buckets (``bucket = -1``): its writers split the input, not buckets."""
        return not self.primary_key and int(self.table_options().get("bucket", "-1")) < 0


def sample_keys(definition: dg.TimeWindowPartitionsDefinition, count: int = 48) -> list[str]:
    """The first ``count`` keys (and no more: an hourly definition over years has many)."""
    keys: list[str] = []
    window = definition.get_first_partition_window()
    while window is not None and len(keys) < count:
        keys.append(window.start.strftime(definition.fmt))
        window = definition.get_next_partition_window(window.end)
    return keys


def check_unique(specs: Sequence["PaimonTableSpec"]) -> None:
    """Two specs of one table, or of one asset key, would fight over the same files or events;
    and a changes consumer must be able to use its source (:func:`check_change_feeds`)."""
    for attribute in ("table", "asset_key", "name"):
        seen: dict[Any, str] = {}
        for spec in specs:
            value = getattr(spec, attribute)
            if value in seen:
                raise TableDefinitionError(f"tables {seen[value]} and {spec.table} share the {attribute} {value!r}; "
                                           "declare each table once")
            seen[value] = spec.table
    check_change_feeds(specs)



def located(context: dg.ResolutionContext, error: TableDefinitionError) -> str:
    """The error's message with the YAML file, line and snippet of the field it names, else of
    the table's entry."""
    message = str(error)
    tree = context.source_position_tree
    if tree is None:
        return message
    path = [*context.path, *error.field_path()]
    for depth in range(len(path), len(context.path) - 1, -1):
        try:
            source = tree.source_error(yaml_path=path[:depth], inline_error_message=message, value_error=True)
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        return f"{source.file_name}:{source.start_line_no} - {source.location}\n{source.snippet}\n{message}"
    return message

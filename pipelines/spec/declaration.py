"""A Paimon table as a Dagster user declares it: one frozen, validated value per table.

Everything the integration builds for a table (asset, ingestion job, compaction sensor,
maintenance schedules, checks) comes from its ``PaimonTableSpec`` and nothing else: there is no
registry of tables anywhere. The YAML component resolves into the same dataclasses, so both
ways of declaring a table are checked by the same code when definitions load, with errors
(``TableDefinitionError``) that name the table and the field.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import dagster as dg
import pyarrow as pa

import paimon_core as pc
from paimon_core.errors import PaimonError
from pipelines.cron import DEFAULT_EXPIRE_CRON, DEFAULT_ORPHANS_CRON
from pipelines.errors import TableDefinitionError, fail
from pipelines.spec.validation import (
    check_change_feeds,
    check_checks,
    check_compaction,
    check_ingestion,
    check_maintenance,
    check_partitions,
    check_threshold,
)
from pipelines.target import TableTarget, follow_seconds
from resources.landing_location import LandingLocation
from resources.partition_mapping import (
    PartitionMapping,
    static_mapping,
    time_mapping,
)
from resources.writes import InputPolicy

# The Paimon value of a time partition when the spec does not say: the window start, as fine
# as the partitions.
DEFAULT_PATTERNS = {"daily": "%Y-%m-%d", "hourly": "%Y-%m-%d %H:00", "weekly": "%Y-%m-%d", "monthly": "%Y-%m"}
# Options every table of the integration gets unless its spec says otherwise: writers that
# only add files, compacted by the dedicated jobs (the compaction sensor), expired by the
# maintenance schedules.
DEDICATED_COMPACTION_OPTIONS = {"write-only": "true"}


@dataclass(frozen=True, slots=True)
class Column:
    """One column: ``type`` is a Paimon / SQL type name (``DECIMAL(12, 2)``, ``TIMESTAMP(6)``,
    ``ARRAY<STRING>``, ``BIGINT NOT NULL``) or an Arrow type."""

    name: str
    type: str | pa.DataType
    description: str | None = None
    nullable: bool = True

    def arrow_field(self) -> pa.Field:
        if isinstance(self.type, str):
            arrow = pc.arrow_field_for(self.name, self.type, description=self.description)
            return arrow if self.nullable else arrow.with_nullable(False)
        metadata = {b"description": self.description.encode()} if self.description else None
        return pa.field(self.name, self.type, self.nullable, metadata=metadata)


@dataclass(frozen=True, slots=True)
class Partitions:
    """The asset's Dagster partitions and how a key maps onto Paimon partition values.

    ``mapping``: Paimon partition column to a ``strftime`` pattern of the window start (time
    partitions) or ``{key}`` (static); empty maps the table's only partition column with the
    kind's default pattern (``%Y-%m-%d`` for days, ``%Y-%m-%d %H:00`` for hours, ``%Y-%m`` for
    months). ``end`` is exclusive, as Dagster's.
    """

    kind: str = "none"
    start: str | None = None
    end: str | None = None
    timezone: str = "UTC"
    keys: tuple[str, ...] = ()
    mapping: Mapping[str, str] = field(default_factory=dict)

    def definition(self) -> dg.PartitionsDefinition | None:
        if self.kind == "none":
            return None
        if self.kind == "static":
            return dg.StaticPartitionsDefinition(list(self.keys))
        common: dict[str, Any] = {"start_date": self.start, "end_date": self.end, "timezone": self.timezone}
        if self.kind == "daily":
            return dg.DailyPartitionsDefinition(**common)
        if self.kind == "hourly":
            return dg.HourlyPartitionsDefinition(**common)
        if self.kind == "weekly":
            return dg.WeeklyPartitionsDefinition(**common)
        return dg.MonthlyPartitionsDefinition(**common)


@dataclass(frozen=True, slots=True)
class Input:
    """An upstream asset a source function reads (through the IO manager: partitions and
    ``columns`` pruned), passed to it as the keyword argument of the same name."""

    asset_key: tuple[str, ...]
    columns: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Ingestion:
    """Where the table's rows come from, and how each partition is written.

    ``function`` (a callable or ``"module:attr"``): the asset's body; it gets the asset's
    context (and the resources its other parameters name) and returns the partition's data (an
    Arrow table, record-batch reader or iterator, a pandas or polars DataFrame). ``landing``:
    files per partition under a template path, read and checked against the table's columns.
    ``mode``: ``overwrite`` (the partition is replaced: re-running is idempotent), ``append``
    or ``upsert`` (primary-key tables). ``schedule``: a schedule materializing each time
    partition once it ended (``schedule_hour``/``schedule_minute`` past it); stopped by
    default. ``landing_sensor``: a sensor launching a partition's run when its landed files
    change (one listing of the location; templates without ``{partition}``: the last
    ``lookback`` partitions). ``retries`` / ``retry_delay_seconds``: the step's retry policy
    (exponential backoff with jitter from that delay; bad data and bad declarations fail at
    once). ``inputs``: upstream assets the function receives by name. ``commit_every_rows``:
    commit every that many rows, as a streaming sink commits at each checkpoint (0: one commit
    per partition); a retried step resumes after the commits that landed. ``executor``:
    one of :data:`pipelines.executors.named.EXECUTORS` for this table's ingestion job (None: the one
    ``paimon_definitions`` was given, in-process by default), ``executor_config`` its config.
    ``workers``: write steps per partition run (Paimon's writer parallelism): above 1 the
    partition's input fans out to that many steps, each preparing its files, and one step
    commits them all as one snapshot. Bucketed tables give each step its buckets (every step
    reads the whole input); append tables without buckets give each its share of the landed
    files, or call the function with ``ingest_slice`` (index, count) to produce its share.

    ``extra_columns``: what the table does with input columns it does not have, for every
    source alike (landed files, a function's DataFrame): ``refuse`` (the default: the run fails
    naming the file or source and the columns, nothing written; upstream schema drift is
    noticed) or ``ignore`` (dropped). ``allow_empty_partitions``: an ``overwrite`` with no rows
    may empty a partition that holds rows (a day without events is real for this table); by
    default such a run fails with nothing written (an empty export, a source that failed quietly).

    ``changes_of``: the table is kept up to date from another Paimon table's changes: the
    function gets each batch of change rows (``_row_kind`` first, then ``change_columns``) and
    returns the rows to append; every batch lands exactly once, and a sensor launches the
    asset when the consumer ``consumer_id`` (default the table's name) has changes to read.
    """

    mode: str = "overwrite"
    function: Callable[..., Any] | str | None = None
    landing: LandingLocation | None = None
    landing_sensor: bool = True
    sensor_interval_seconds: int = 60
    lookback: int = 3
    schedule: bool = False
    schedule_hour: int | None = None
    schedule_minute: int = 0
    retries: int = 3
    retry_delay_seconds: float = 5.0
    executor: str | None = None
    executor_config: Mapping[str, Any] = field(default_factory=dict)
    workers: int = 1
    inputs: Mapping[str, Input] = field(default_factory=dict)
    commit_every_rows: int = 0
    extra_columns: str = "refuse"
    allow_empty_partitions: bool = False
    changes_of: str | None = None
    consumer_id: str | None = None
    change_columns: tuple[str, ...] = ()

    def input_policy(self) -> InputPolicy:
        """What the table takes at its ingestion boundary, for every source."""
        return InputPolicy(extra_columns=self.extra_columns, allow_empty_partitions=self.allow_empty_partitions)

    def resolved_function(self, table: str) -> Callable[..., Any] | None:
        """The callable, imported when given as ``"package.module:attr"``."""
        if self.function is None or callable(self.function):
            return self.function
        module_name, sep, attribute = self.function.partition(":")
        if not sep or not module_name or not attribute:
            raise fail(table, "ingestion.function", f"{self.function!r} is not 'package.module:function'")
        try:
            target = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as exc:
            raise fail(table, "ingestion.function", f"cannot import {self.function!r}: {exc}") from None
        if not callable(target):
            raise fail(table, "ingestion.function", f"{self.function!r} is a {type(target).__name__}, not a function")
        return target


@dataclass(frozen=True, slots=True)
class Compaction:
    """The dedicated compaction of a write-only table.

    ``sensor``: a sensor launching the compaction job when a bucket's level 0 reaches
    ``level0_threshold`` files (None: the table's trigger); off, the table's writers compact
    themselves (the table is not write-only). ``job``: ``minor`` (Paimon's picker) or ``full``
    (every bucket into one sorted run, as the full-compaction changelog producer needs).
    ``follow_seconds``: how long a run keeps compacting as writers commit. Unset,
    ``interval_seconds`` and ``follow_seconds`` read ``$PAIMON_COMPACTION_SENSOR_INTERVAL``
    (default 30) and ``$PAIMON_COMPACTION_FOLLOW_SECONDS`` (default 0) when definitions load.
    ``buckets_per_step``: a run's steps each compact that many buckets of a partition (0: a
    partition per step), in parallel on the code location's executor; ``commit_once``: the
    steps only write files and the run commits them as one snapshot at its end.
    """

    sensor: bool = True
    level0_threshold: int | None = None
    interval_seconds: int | None = None
    follow_seconds: int | None = None
    job: str = "minor"
    buckets_per_step: int = 0
    commit_once: bool = False


@dataclass(frozen=True, slots=True)
class Maintenance:
    """Snapshot expiry and orphan-file cleanup: schedules (UTC crons; None: no schedule) and
    overrides of the table's retention options for the expiry runs."""

    expire_cron: str | None = DEFAULT_EXPIRE_CRON
    orphans_cron: str | None = DEFAULT_ORPHANS_CRON
    retain_min: int | None = None
    retain_max: int | None = None
    max_deletes: int | None = None


@dataclass(frozen=True, slots=True)
class DataChecks:
    """Rules the written partition must meet (the ``partition_valid`` check): at least
    ``min_rows`` rows, no nulls in ``not_null``, no duplicates in ``unique``, only the listed
    values in ``accepted_values``. ``blocking``: a failure stops downstream assets of the run."""

    min_rows: int = 1
    not_null: tuple[str, ...] = ()
    unique: tuple[str, ...] = ()
    accepted_values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    blocking: bool = True


@dataclass(frozen=True, slots=True)
class PaimonTableSpec:
    """A Paimon table, its Dagster asset and what keeps the table in shape.

    ``table`` is ``db.table``; ``asset_key`` defaults to ``[db, table]`` and may have any
    length; ``group`` defaults to the database. ``options`` are Paimon table options; with the
    compaction sensor on, ``write-only`` is added (the sensor's jobs compact). ``consumers``:
    ids of consumers of the table's changes, shown with its retention (expiry keeps their
    unread snapshots).
    """

    table: str
    columns: tuple[Column, ...] | pa.Schema
    primary_key: tuple[str, ...] = ()
    partition_keys: tuple[str, ...] = ()
    options: Mapping[str, str] = field(default_factory=dict)
    asset_key: tuple[str, ...] = ()
    group: str | None = None
    description: str | None = None
    owners: tuple[str, ...] = ()
    tags: Mapping[str, str] = field(default_factory=dict)
    partitions: Partitions = field(default_factory=Partitions)
    ingestion: Ingestion | None = None
    compaction: Compaction = field(default_factory=Compaction)
    maintenance: Maintenance = field(default_factory=Maintenance)
    consumers: tuple[str, ...] = ()
    checks: DataChecks | None = None

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
        return self.table.replace(".", "_")

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

    def with_options(self, **changes: Any) -> PaimonTableSpec:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    # ---- validation -------------------------------------------------------------------------

    def validate(self) -> None:
        """Refuse a declaration that cannot work, naming the field; nothing is written."""
        table = self.table
        if not self.column_list:
            raise fail(table, "columns", "no columns declared")
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


def check_unique(specs: Sequence[PaimonTableSpec]) -> None:
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


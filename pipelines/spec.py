"""A Paimon table as a Dagster user declares it: one frozen, validated value per table.

Everything the integration builds for a table (asset, ingestion job, compaction sensor,
maintenance schedules, checks) comes from its ``PaimonTableSpec`` and nothing else: there is no
registry of tables anywhere. The YAML component resolves into the same dataclasses, so both
ways of declaring a table are checked by the same code when definitions load, with errors
(``TableDefinitionError``) that name the table and the field.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import dagster as dg
import pyarrow as pa

import paimon_core as pc
from paimon_core.errors import PaimonError, TableDefinitionError
from pipelines.executors import executor_named
from pipelines.schedule_ticks import checked_cron
from resources.landing_location import LandingError, LandingLocation
from resources.partition_mapping import (
    PartitionMapping,
    PartitionMappingError,
    static_mapping,
    time_mapping,
)
from resources.writes import WRITE_MODES

PARTITION_KINDS = ("none", "daily", "hourly", "weekly", "monthly", "static")
# The Paimon value of a time partition when the spec does not say: the window start, as fine
# as the partitions.
DEFAULT_PATTERNS = {"daily": "%Y-%m-%d", "hourly": "%Y-%m-%d %H:00", "weekly": "%Y-%m-%d", "monthly": "%Y-%m"}
COMPACTION_JOBS = ("minor", "full")
# The parameter of a source function that receives its share of a fanned-out partition.
SLICE_PARAMETER = "ingest_slice"
DEFAULT_EXPIRE_CRON = "0 * * * *"
DEFAULT_ORPHANS_CRON = "0 3 * * *"
# Options every table of the integration gets unless its spec says otherwise: writers that
# only add files, compacted by the dedicated jobs (the compaction sensor), expired by the
# maintenance schedules.
DEDICATED_COMPACTION_OPTIONS = {"write-only": "true"}


def _fail(table: str, field_name: str, problem: str) -> TableDefinitionError:
    return TableDefinitionError(f"table {table}: {field_name}: {problem}")


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
    one of :data:`pipelines.executors.EXECUTORS` for this table's ingestion job (None: the one
    ``paimon_definitions`` was given, in-process by default), ``executor_config`` its config.
    ``workers``: write steps per partition run (Paimon's writer parallelism): above 1 the
    partition's input fans out to that many steps, each preparing its files, and one step
    commits them all as one snapshot. Bucketed tables give each step its buckets (every step
    reads the whole input); append tables without buckets give each its share of the landed
    files, or call the function with ``ingest_slice`` (index, count) to produce its share.

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
    changes_of: str | None = None
    consumer_id: str | None = None
    change_columns: tuple[str, ...] = ()

    def resolved_function(self, table: str) -> Callable[..., Any] | None:
        """The callable, imported when given as ``"package.module:attr"``."""
        if self.function is None or callable(self.function):
            return self.function
        module_name, sep, attribute = self.function.partition(":")
        if not sep or not module_name or not attribute:
            raise _fail(table, "ingestion.function", f"{self.function!r} is not 'package.module:function'")
        try:
            target = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as exc:
            raise _fail(table, "ingestion.function", f"cannot import {self.function!r}: {exc}") from None
        if not callable(target):
            raise _fail(table, "ingestion.function", f"{self.function!r} is a {type(target).__name__}, not a function")
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

    def with_options(self, **changes: Any) -> PaimonTableSpec:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    # ---- validation -------------------------------------------------------------------------

    def validate(self) -> None:
        """Refuse a declaration that cannot work, naming the field; nothing is written."""
        table = self.table
        if not self.column_list:
            raise _fail(table, "columns", "no columns declared")
        try:
            schema = self.arrow_schema()
            declared = pc.validate_table(table, schema=schema, partition_keys=self.partition_keys,
                                      primary_keys=self.primary_key, options=self.table_options(),
                                      comment=self.description)
        except TableDefinitionError:
            raise
        except PaimonError as exc:
            raise TableDefinitionError(f"table {table}: {exc}") from None
        self._validate_threshold(declared.table_options())
        if any(not part for part in self.asset_key):
            raise _fail(table, "asset_key", f"{list(self.asset_key)} has an empty part")
        self._validate_partitions()
        self._validate_ingestion()
        self._validate_compaction()
        self._validate_maintenance()
        self._validate_checks()

    def _validate_checks(self) -> None:
        if self.checks is None:
            return
        names = {column.name for column in self.column_list}
        for rule in ("not_null", "unique", "accepted_values"):
            unknown = [c for c in getattr(self.checks, rule) if c not in names]
            if unknown:
                raise _fail(self.table, f"checks.{rule}", f"{unknown} are not columns of the table")
        if self.checks.min_rows < 0:
            raise _fail(self.table, "checks.min_rows", f"must be >= 0, got {self.checks.min_rows}")

    def _validate_partitions(self) -> None:
        table, spec = self.table, self.partitions
        if spec.kind not in PARTITION_KINDS:
            raise _fail(table, "partitions.kind", f"{spec.kind!r} is not one of {', '.join(PARTITION_KINDS)}")
        if spec.kind == "none":
            if spec.mapping:
                raise _fail(table, "partitions.mapping", "given for an unpartitioned asset; set partitions.kind")
            return
        if spec.kind == "static":
            if not spec.keys:
                raise _fail(table, "partitions.keys", "static partitions need at least one key")
            if len(spec.mapping) > 1:
                raise _fail(table, "partitions.mapping", "a static key maps to one Paimon column")
        elif not spec.start:
            raise _fail(table, "partitions.start", f"{spec.kind} partitions need a start date (YYYY-MM-DD)")
        if not self.partition_keys:
            raise _fail(table, "partitions", f"the asset has {spec.kind} partitions but the table has no "
                        "partition_keys to write them to; add e.g. partition_keys: [dt]")
        if not spec.mapping and len(self.partition_keys) != 1:
            raise _fail(table, "partitions.mapping", f"the table is partitioned by {list(self.partition_keys)}; "
                        "say which column(s) the Dagster key maps to, e.g. {dt: '%Y-%m-%d'}")
        unknown = [c for c in spec.mapping if c not in self.partition_keys]
        if unknown:
            raise _fail(table, "partitions.mapping", f"{unknown} are not partition keys of the table "
                        f"({list(self.partition_keys)})")
        try:
            definition = self.partitions_def()
        except (dg.DagsterInvalidDefinitionError, ValueError, TypeError) as exc:
            raise _fail(table, "partitions", str(exc).splitlines()[0]) from None
        if isinstance(definition, dg.TimeWindowPartitionsDefinition) and (
                definition.get_first_partition_window() is None):
            raise _fail(table, "partitions.end", f"{spec.end} leaves no partition after {spec.start}")
        try:
            self.partition_mapping()
        except PartitionMappingError as exc:
            raise TableDefinitionError(str(exc)) from None

    def _validate_ingestion(self) -> None:
        table, ingestion = self.table, self.ingestion
        if ingestion is None:
            return
        if ingestion.mode not in WRITE_MODES:
            raise _fail(table, "ingestion.mode", f"{ingestion.mode!r} is not one of {', '.join(WRITE_MODES)}")
        if ingestion.mode == "upsert" and not self.primary_key:
            raise _fail(table, "ingestion.mode", "upsert needs a primary key; use append or overwrite, or "
                        "declare primary_key")
        if (ingestion.function is None) == (ingestion.landing is None):
            raise _fail(table, "ingestion", "give exactly one of function (your code returns the data) and "
                        "landing (files under a path)")
        ingestion.resolved_function(table)
        if ingestion.changes_of is not None:
            if ingestion.landing is not None or ingestion.inputs:
                raise _fail(table, "ingestion.changes_of", "a changes consumer gets its rows from the source table's "
                            "changes; drop landing and inputs")
            if ingestion.mode != "append" or self.partitions.kind != "none":
                raise _fail(table, "ingestion.changes_of", "change batches are appended, each once, to an "
                            "unpartitioned asset: set mode append and no partitions (the table may still have "
                            "partition_keys)")
        if ingestion.executor is not None:
            executor_named(ingestion.executor, ingestion.executor_config, table=table)
        elif ingestion.executor_config:
            raise _fail(table, "ingestion.executor_config", "given without ingestion.executor; name the executor")
        self._validate_workers()
        if ingestion.commit_every_rows < 0:
            raise _fail(table, "ingestion.commit_every_rows", f"must be >= 0, got {ingestion.commit_every_rows}")
        if ingestion.landing is not None:
            if ingestion.mode == "append":
                raise _fail(table, "ingestion.mode", "a landing location is ingested per partition with overwrite "
                            "(or upsert), so re-running a partition never ingests its files twice")
            try:
                ingestion.landing.validate(table=table, partitioned=self.partitions.kind != "none",
                                           columns=self.partition_keys)
            except LandingError as exc:
                raise TableDefinitionError(str(exc)) from None
        for name, value, low in (("sensor_interval_seconds", ingestion.sensor_interval_seconds, 1),
                                 ("lookback", ingestion.lookback, 1), ("retries", ingestion.retries, 0),
                                 ("schedule_minute", ingestion.schedule_minute, 0)):
            if value < low:
                raise _fail(table, f"ingestion.{name}", f"must be at least {low}, got {value}")
        if ingestion.schedule and not isinstance(self.partitions_def(), dg.TimeWindowPartitionsDefinition):
            raise _fail(table, "ingestion.schedule", "a schedule materializes time partitions as they end; the "
                        f"asset has {self.partitions.kind} partitions")

    @property
    def bucketless_append(self) -> bool:
        """An append table without buckets (``bucket = -1``): its writers split the input, not buckets."""
        return not self.primary_key and int(self.table_options().get("bucket", "-1")) < 0

    def _validate_workers(self) -> None:
        ingestion = self.ingestion
        assert ingestion is not None
        if ingestion.workers == 1:
            return
        if ingestion.workers < 1:
            raise _fail(self.table, "ingestion.workers", f"must be at least 1, got {ingestion.workers}")
        if ingestion.changes_of is not None or ingestion.commit_every_rows:
            raise _fail(self.table, "ingestion.workers", "a fanned-out partition is one commit: drop changes_of "
                        "or commit_every_rows, or keep workers at 1")
        function = ingestion.resolved_function(self.table)
        if self.bucketless_append and function is not None and \
                SLICE_PARAMETER not in inspect.signature(function).parameters:
            raise _fail(self.table, "ingestion.workers", f"the table has no buckets, so each write step needs its own "
                        f"share of the input: give the function a parameter {SLICE_PARAMETER!r} (it receives the "
                        "step's index and count), or keep workers at 1")

    def _validate_threshold(self, options: pc.TableOptions) -> None:
        """A sensor threshold below the picker's trigger would launch runs that find nothing to do."""
        threshold = self.compaction.level0_threshold
        if threshold is None:
            return
        trigger, name = ((options.sorted_run_compaction_trigger, "num-sorted-run.compaction-trigger")
                         if self.primary_key else (options.compaction_min_file_num, "compaction.min.file-num"))
        if threshold < trigger:
            raise _fail(self.table, "compaction.level0_threshold",
                        f"{threshold} is below the table's compaction trigger {trigger} ({name}), so the runs it "
                        f"launches would find nothing to compact; set the option {name} to {threshold} instead")

    def _validate_compaction(self) -> None:
        table, compaction = self.table, self.compaction
        if compaction.job not in COMPACTION_JOBS:
            raise _fail(table, "compaction.job", f"{compaction.job!r} is not one of {', '.join(COMPACTION_JOBS)}")
        if compaction.job == "full" and not self.primary_key:
            raise _fail(table, "compaction.job", "full compaction jobs are for primary-key tables; append tables "
                        "compact small files with the minor job")
        if compaction.level0_threshold is not None and compaction.level0_threshold < 1:
            raise _fail(table, "compaction.level0_threshold", f"must be at least 1, got {compaction.level0_threshold}")
        if (compaction.interval_seconds is not None and compaction.interval_seconds < 1) or (
                compaction.follow_seconds is not None and compaction.follow_seconds < 0):
            raise _fail(table, "compaction", "interval_seconds must be >= 1 and follow_seconds >= 0")
        if compaction.buckets_per_step < 0:
            raise _fail(table, "compaction.buckets_per_step", f"must be >= 0, got {compaction.buckets_per_step}")
        if not compaction.sensor and self.table_options().get("write-only") == "true":
            raise _fail(table, "compaction.sensor", "off for a write-only table: nothing would ever compact it")

    def _validate_maintenance(self) -> None:
        table, maintenance = self.table, self.maintenance
        for name in ("expire_cron", "orphans_cron"):
            cron = getattr(maintenance, name)
            if cron is not None:
                try:
                    checked_cron(cron, f"table {table}: maintenance.{name}")
                except dg.DagsterInvariantViolationError as exc:
                    raise TableDefinitionError(str(exc)) from None
        for name in ("retain_min", "retain_max", "max_deletes"):
            value = getattr(maintenance, name)
            if value is not None and value < 1:
                raise _fail(table, f"maintenance.{name}", f"must be at least 1, got {value}")
        if (maintenance.retain_min and maintenance.retain_max and maintenance.retain_min > maintenance.retain_max):
            raise _fail(table, "maintenance", f"retain_min {maintenance.retain_min} is above retain_max "
                        f"{maintenance.retain_max}")


def sample_keys(definition: dg.TimeWindowPartitionsDefinition, count: int = 48) -> list[str]:
    """The first ``count`` keys (and no more: an hourly definition over years has many)."""
    keys: list[str] = []
    window = definition.get_first_partition_window()
    while window is not None and len(keys) < count:
        keys.append(window.start.strftime(definition.fmt))
        window = definition.get_next_partition_window(window.end)
    return keys


def check_unique(specs: Sequence[PaimonTableSpec]) -> None:
    """Two specs of one table, or of one asset key, would fight over the same files or events."""
    for attribute in ("table", "asset_key", "name"):
        seen: dict[Any, str] = {}
        for spec in specs:
            value = getattr(spec, attribute)
            if value in seen:
                raise TableDefinitionError(f"tables {seen[value]} and {spec.table} share the {attribute} {value!r}; "
                                           "declare each table once")
            seen[value] = spec.table


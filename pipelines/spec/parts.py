"""The parts of a table declaration: columns, partitions, ingestion, compaction, maintenance, checks.

Each is a frozen dataclass and, as Dagster's ``Resolvable``, its own YAML schema: a field is
declared once, with its default and its documentation, and reads the same from Python and from
a ``defs.yaml`` (:mod:`pipelines.spec.yaml_forms` for the fields YAML writes otherwise).
"""

# No `from __future__ import annotations`: Dagster derives the YAML schema from these
# annotations as real types.

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Annotated, Any

import dagster as dg
import pyarrow as pa

import paimon_core as pc
from pipelines.cron import DEFAULT_EXPIRE_CRON, DEFAULT_ORPHANS_CRON
from pipelines.errors import fail
from pipelines.spec.yaml_forms import doc, function_field, text_field, type_field
from resources.landing_location import LandingLocation
from resources.write_shares import SHARD_BY_BUCKET, SLICE_IN_ORDER
from resources.writes import InputPolicy

# How the write steps of a fanned-out bucketed table share a partition (ingestion.fan_out).
FAN_OUTS = (SLICE_IN_ORDER, SHARD_BY_BUCKET)
BACKFILL_POLICIES = ("multi_run", "single_run")


@dataclass(frozen=True, slots=True)
class Column(dg.Resolvable):
    """One column of the table."""

    name: Annotated[str, doc("The column's name.")]
    type: Annotated[str | pa.DataType, type_field(
        "A Paimon / SQL type name: BIGINT, DECIMAL(12, 2), TIMESTAMP(6), ARRAY<STRING>, BIGINT NOT NULL ... "
        "(in Python an Arrow type too).")]
    description: Annotated[str | None, doc("Shown with the column on the asset page.")] = None
    nullable: Annotated[bool, doc("False: the column holds no nulls (a primary-key column never does).")] = True

    def arrow_field(self) -> pa.Field:
        if isinstance(self.type, str):
            arrow = pc.arrow_field_for(self.name, self.type, description=self.description)
            return arrow if self.nullable else arrow.with_nullable(False)
        metadata = {b"description": self.description.encode()} if self.description else None
        return pa.field(self.name, self.type, self.nullable, metadata=metadata)


@dataclass(frozen=True, slots=True)
class Partitions(dg.Resolvable):
    """The asset's Dagster partitions and how a key maps onto Paimon partition values."""

    kind: Annotated[str, doc("none, daily, hourly, weekly, monthly or static.")] = "none"
    start: Annotated[str | None, text_field("The first time partition (2024-01-01, or 2024-01-01-00:00 "
                                            "for hours).")] = None
    end: Annotated[str | None, text_field("The end of the time partitions, exclusive as Dagster's "
                                          "(unset: up to now).")] = None
    timezone: Annotated[str, doc("The time partitions' timezone.")] = "UTC"
    keys: Annotated[tuple[str, ...], doc("The keys of static partitions.")] = ()
    mapping: Annotated[Mapping[str, str], doc(
        "Paimon partition column to a strftime pattern of the window start (time partitions) or '{key}' "
        "(static). Empty maps the table's only partition column with the kind's default pattern (%Y-%m-%d for "
        "days, %Y-%m-%d %H:00 for hours, %Y-%m for months).")] = field(default_factory=dict)

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
class Input(dg.Resolvable):
    """An upstream asset a source function reads through the IO manager (partitions and columns
    pruned), passed to it as the keyword argument of the same name."""

    asset_key: Annotated[tuple[str, ...], doc("The upstream asset's key.")]
    columns: Annotated[tuple[str, ...], doc("The columns to read (empty: all).")] = ()


@dataclass(frozen=True, slots=True)
class Ingestion(dg.Resolvable):
    """Where the table's rows come from, and how each partition is written.

    A source ``function`` gets the asset's context (and the resources its other parameters name)
    and returns the partition's data: an Arrow table, record-batch reader or iterator, a pandas
    or polars DataFrame. A ``landing`` location's files are read and checked against the table's
    columns. Bad data and bad declarations fail at once, without retries.
    """

    mode: Annotated[str, doc(
        "overwrite (the partition is replaced: re-running is idempotent), append, or upsert (primary-key "
        "tables).")] = "overwrite"
    function: Annotated[Callable[..., Any] | str | None, function_field(
        "'package.module:function' (in Python a callable) returning the partition's data.")] = None
    landing: Annotated[LandingLocation | None, doc("Files per partition under a template path, read and "
                                                   "checked against the table's columns.")] = None
    landing_sensor: Annotated[bool, doc("A sensor launching a partition's run when its landed files change "
                                        "(one listing of the location per tick).")] = True
    sensor_interval_seconds: Annotated[int, doc("Seconds between the landing or changes sensor's "
                                                "ticks.")] = 60
    lookback: Annotated[int, doc("Templates without {partition}: the partitions the landing sensor looks at, "
                                 "newest first.")] = 3
    schedule: Annotated[bool, doc("A schedule materializing each time partition once it ended (stopped by "
                                  "default: turn it on in the UI).")] = False
    schedule_hour: Annotated[int | None, doc("The hour past a partition's end the schedule runs it.")] = None
    schedule_minute: Annotated[int, doc("The minute past a partition's end the schedule runs it.")] = 0
    retries: Annotated[int, doc("Retries of the write step (exponential backoff with jitter).")] = 3
    retry_delay_seconds: Annotated[float, doc("The first retry's delay.")] = 5.0
    executor: Annotated[str | None, doc(
        "in_process, multiprocess, dask, k8s or celery for this table's ingestion job (unset: the code "
        "location's, in-process by default).")] = None
    executor_config: Annotated[Mapping[str, Any], doc("The executor's config, as in run config.")] = \
        field(default_factory=dict)
    workers: Annotated[int, doc(
        "Write steps per partition run (Paimon's writer parallelism), committed as one snapshot. Tables with "
        "fixed buckets give each step its slice of the input or its buckets (fan_out); dynamic-bucket tables "
        "its buckets; append tables without buckets its share of the landed files, or call the function with "
        "ingest_slice (index, count; None when one step writes the partition).")] = 1
    fan_out: Annotated[str, doc(
        "With workers > 1 on a table with fixed buckets: slices (each step reads only its part of the input, "
        "in input order: a run of the landed files, or the function's ingest_slice; writes every bucket, "
        "numbered so the commit merges as one writer's; more level-0 files for compaction to fold) or "
        "buckets (each step reads the whole input and writes the buckets it owns). Dynamic-bucket tables, "
        "functions without ingest_slice and a single landed file use buckets.")] = "slices"
    backfill_policy: Annotated[str, doc(
        "multi_run (a backfill launches a run per max_partitions_per_run partitions) or single_run (a backfill, "
        "or `dagster asset materialize --partition-range`, writes the whole range in one run). Either way each "
        "partition is its own exactly-once commit with its own materialization; with workers > 1 the write "
        "steps of every partition of the run are fanned out at once.")] = "multi_run"
    max_partitions_per_run: Annotated[int, doc("With multi_run: the partitions a backfill puts in one "
                                               "run.")] = 1
    inputs: Annotated[dict[str, Input], doc("Upstream assets the function receives by name.")] = \
        field(default_factory=dict)
    commit_every_rows: Annotated[int, doc(
        "Commit every that many rows, as a streaming sink commits at each checkpoint (0: one commit per "
        "partition); a retried step resumes after the commits that landed.")] = 0
    extra_columns: Annotated[str, doc(
        "refuse (fail naming the file or source and the columns, nothing written) or ignore (drop) input "
        "columns the table does not have, for landed files and DataFrames alike.")] = "refuse"
    allow_empty_partitions: Annotated[bool, doc(
        "Let an overwrite with no rows empty a partition that holds rows (otherwise the run fails with "
        "nothing written: an empty export, a source that failed quietly).")] = False
    changes_of: Annotated[str | None, doc(
        "db.table whose changes feed this table: the function gets each batch of change rows (_row_kind "
        "first, then change_columns) and returns the rows to append; every batch lands exactly once.")] = None
    consumer_id: Annotated[str | None, doc("The consumer id reading changes_of (default the table's "
                                           "name).")] = None
    change_columns: Annotated[tuple[str, ...], doc("The source's columns a change batch carries (empty: "
                                                   "all).")] = ()
    fresh_within: Annotated[str | None, doc(
        "Dagster's freshness policy: the asset shows Fail when no partition was written for this long ('26 h', "
        "'90 min', '2 d'; at least a minute), so a table that stops receiving data shows it (unset: "
        "none).")] = None
    warn_within: Annotated[str | None, doc("With fresh_within: Warn once no partition was written for this "
                                           "long (shorter than fresh_within).")] = None
    partition_runtime: Annotated[str | None, doc(
        "The longest writing one partition may take: the table's watchdog fails a run writing N partitions "
        "once it has run N times this (its process presumably died with its host, and it holds the table's "
        "writers' pool, so every later write would wait for it); '2 h', '30 min' (unset: never).")] = "2 h"

    def input_policy(self) -> InputPolicy:
        """What the table takes at its ingestion boundary, for every source."""
        return InputPolicy(extra_columns=self.extra_columns, allow_empty_partitions=self.allow_empty_partitions)

    def ranged(self) -> bool:
        """Whether a run may write more than one partition (then each is written in turn)."""
        return self.backfill_policy == "single_run" or self.max_partitions_per_run > 1

    def dagster_backfill_policy(self) -> dg.BackfillPolicy | None:
        """The asset's backfill policy (None, Dagster's run per partition, unless declared)."""
        if self.backfill_policy == "single_run":
            return dg.BackfillPolicy.single_run()
        return dg.BackfillPolicy.multi_run(self.max_partitions_per_run) if self.max_partitions_per_run > 1 else None

    def freshness_policy(self) -> dg.FreshnessPolicy | None:
        """The asset's time-window freshness policy, when ``fresh_within`` is set (checked at load)."""
        if self.fresh_within is None:
            return None
        warn = self.warn_within
        return dg.FreshnessPolicy.time_window(
            fail_window=timedelta(milliseconds=pc.parse_duration_ms(self.fresh_within)),
            warn_window=timedelta(milliseconds=pc.parse_duration_ms(warn)) if warn is not None else None)

    def partition_runtime_s(self) -> float | None:
        """``partition_runtime`` in seconds (checked at load), None when unset."""
        return None if self.partition_runtime is None else pc.parse_duration_ms(self.partition_runtime) / 1000

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
class Compaction(dg.Resolvable):
    """The dedicated compaction of a write-only table."""

    sensor: Annotated[bool, doc(
        "A sensor launching the compaction job when a bucket's level 0 reaches level0_threshold files; off, "
        "the table's writers compact themselves (the table is not write-only).")] = True
    level0_threshold: Annotated[int | None, doc("Level-0 files of a bucket that launch a compaction (unset: "
                                                "the table's trigger).")] = None
    interval_seconds: Annotated[int | None, doc(
        "Seconds between the sensor's ticks (unset: $PAIMON_COMPACTION_SENSOR_INTERVAL, default 30, read when "
        "definitions load).")] = None
    follow_seconds: Annotated[int | None, doc(
        "How long a run keeps compacting as writers commit (unset: $PAIMON_COMPACTION_FOLLOW_SECONDS, "
        "default 0).")] = None
    job: Annotated[str, doc("minor (Paimon's picker) or full (every bucket into one sorted run, as the "
                            "full-compaction changelog producer needs).")] = "minor"
    buckets_per_step: Annotated[int, doc("Buckets per compaction step, in parallel on the code location's "
                                         "executor (0: a partition per step).")] = 0
    commit_once: Annotated[bool, doc("The steps only write files and the run commits them as one snapshot "
                                     "at its end.")] = False


@dataclass(frozen=True, slots=True)
class Maintenance(dg.Resolvable):
    """Snapshot expiry and orphan-file cleanup: their schedules, and overrides of the table's
    retention options for the expiry runs."""

    enabled: Annotated[bool, doc("False: no expiry or cleanup schedule (as both crons unset).")] = True
    expire_cron: Annotated[str | None, doc("The UTC cron of snapshot expiry (unset: no schedule).")] = \
        DEFAULT_EXPIRE_CRON
    orphans_cron: Annotated[str | None, doc("The UTC cron of orphan-file cleanup (unset: no schedule).")] = \
        DEFAULT_ORPHANS_CRON
    retain_min: Annotated[int | None, doc("snapshot.num-retained.min for the expiry runs.")] = None
    retain_max: Annotated[int | None, doc("snapshot.num-retained.max for the expiry runs.")] = None
    max_deletes: Annotated[int | None, doc("snapshot.expire.limit: snapshots one expiry run deletes at "
                                           "most.")] = None

    def __post_init__(self) -> None:
        if not self.enabled:
            object.__setattr__(self, "expire_cron", None)
            object.__setattr__(self, "orphans_cron", None)


@dataclass(frozen=True, slots=True)
class DataChecks(dg.Resolvable):
    """Rules the written partition must meet: the ``partition_valid`` check of each write."""

    min_rows: Annotated[int, doc("At least this many rows.")] = 1
    not_null: Annotated[tuple[str, ...], doc("Columns without nulls.")] = ()
    unique: Annotated[tuple[str, ...], doc("Columns whose values (together) appear once.")] = ()
    accepted_values: Annotated[dict[str, tuple[str, ...]], doc("Column to the only values it may "
                                                               "hold.")] = field(default_factory=dict)
    blocking: Annotated[bool, doc("A failure stops downstream assets of the run.")] = True

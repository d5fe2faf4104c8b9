"""The checks of a table declaration: each refuses what cannot work, naming the table and the field.

Pure functions of a :class:`pipelines.spec.declaration.PaimonTableSpec` (nothing is read or written), run
when the spec is built, so a bad declaration fails when the definitions load.
"""

from __future__ import annotations

import difflib
import inspect
import re
import zoneinfo
from collections.abc import Sequence
from typing import TYPE_CHECKING

import dagster as dg

import paimon_core as pc
from pipelines.cron import checked_cron
from pipelines.errors import TableDefinitionError, fail
from pipelines.executors.named import executor_named
from pipelines.spec.parts import BACKFILL_POLICIES, FAN_OUTS
from resources.landing_location import LandingError
from resources.partition_mapping import PartitionMappingError
from resources.writes import EXTRA_COLUMNS, WRITE_MODES

if TYPE_CHECKING:
    from pipelines.spec.declaration import PaimonTableSpec


PARTITION_KINDS = ("none", "daily", "hourly", "weekly", "monthly", "static")
COMPACTION_JOBS = ("minor", "full")
# What Dagster allows in a definition name (and a group name segment).
DAGSTER_NAME = re.compile(r"^[A-Za-z0-9_]+$")
# The parameter of a source function that receives its share of a fanned-out partition.
SLICE_PARAMETER = "ingest_slice"
# Dagster's freshness daemon evaluates windows of a minute or more.
FRESHNESS_MIN_MS = 60_000



def change_source_problem(consumer: str, source: str, *, primary_key: bool, options: pc.TableOptions,
                          columns: Sequence[str], change_columns: Sequence[str]) -> str | None:
    """Why ``source`` cannot feed the changes consumer ``consumer``, naming both tables, or None.

    The same words whether the source is declared beside the consumer (checked when definitions
    load) or elsewhere (checked at the consumer's first run).
    """
    problem = pc.change_feed_problem(primary_key=primary_key, merge_engine=options.merge_engine,
                                     producer=options.changelog_producer)
    if problem is not None:
        return f"table {consumer}: ingestion.changes_of: its source {source} has {problem}"
    unknown = [c for c in change_columns if c not in columns]
    if unknown:
        return (f"table {consumer}: ingestion.change_columns: {unknown} are not columns of its source {source} "
                f"({', '.join(columns)})")
    return None


def typo_of(name: str, known: Sequence[str]) -> str | None:
    """The known name ``name`` is a typo of: at most two letters added, dropped or changed."""
    near = [(edit_distance(name, other), other) for other in known if other != name]
    best = min(near, default=None)
    return best[1] if best is not None and best[0] <= 2 else None


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (letters inserted, deleted or substituted)."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def unknown_source(consumer: str, source: str, known: Sequence[str]) -> str:
    """The message for a ``changes_of`` naming no table, with the nearest known name."""
    near = typo_of(source, known)
    hint = f"; did you mean {near}?" if near else f" (tables: {', '.join(sorted(known)) or 'none'})"
    return f"table {consumer}: ingestion.changes_of: there is no table {source}{hint}"


def check_change_feeds(specs: Sequence[PaimonTableSpec]) -> None:
    """Consumers of tables declared in the same definitions: the source exists, its changes are
    merged rows with before-images, and ``change_columns`` are its columns. A source nobody here
    declares (written by another code location or engine) is checked at the consumer's first run,
    unless its name is a letter or two away from a declared table's (a typo)."""
    declared = {spec.table: spec for spec in specs}
    for spec in specs:
        ingestion = spec.ingestion
        if ingestion is None or ingestion.changes_of is None:
            continue
        source = declared.get(ingestion.changes_of)
        if source is None:
            if typo_of(ingestion.changes_of, list(declared)) is not None:
                raise TableDefinitionError(unknown_source(spec.table, ingestion.changes_of, list(declared)))
            continue
        problem = change_source_problem(spec.table, source.table, primary_key=bool(source.primary_key),
                                        options=pc.TableOptions.from_map(source.table_options(), table=source.table),
                                        columns=[c.name for c in source.column_list],
                                        change_columns=ingestion.change_columns)
        if problem is not None:
            raise TableDefinitionError(problem)


def check_checks(spec: PaimonTableSpec) -> None:
    if spec.checks is None:
        return
    names = {column.name for column in spec.column_list}
    for rule in ("not_null", "unique", "accepted_values"):
        unknown = [c for c in getattr(spec.checks, rule) if c not in names]
        if unknown:
            raise fail(spec.table, f"checks.{rule}", f"{unknown} are not columns of the table")
    if spec.checks.min_rows < 0:
        raise fail(spec.table, "checks.min_rows", f"must be >= 0, got {spec.checks.min_rows}")


def check_name(spec: PaimonTableSpec) -> None:
    """The table's name makes its Dagster names (jobs, sensors, schedules, the default group),
    which allow letters, digits and ``_`` only: refuse others here, naming the one to use."""
    table = spec.table
    parts = table.split(".")
    if len(parts) != 2 or not all(DAGSTER_NAME.match(part) for part in parts):
        fixed = ".".join(re.sub(r"\W", "_", part) for part in parts) if len(parts) == 2 else None
        hint = f"; e.g. {fixed}" if fixed and all(DAGSTER_NAME.match(p) for p in fixed.split(".")) else ""
        raise fail(table, "table", f"{table!r} must be database.table, each of letters, digits and _ (the table's "
                   f"Dagster jobs, sensors and schedules are named after it){hint}")


def check_timezone(spec: PaimonTableSpec) -> None:
    """A time zone Python knows, or the name of the nearest one."""
    zone = spec.partitions.timezone
    if not zone:
        return
    try:
        zoneinfo.ZoneInfo(zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        near = difflib.get_close_matches(zone, sorted(zoneinfo.available_timezones()), n=1)
        hint = f"; did you mean {near[0]}?" if near else " (an IANA name such as Europe/Paris or UTC)"
        raise fail(spec.table, "partitions.timezone", f"{zone!r} is not a time zone{hint}") from None


def check_partitions(spec: PaimonTableSpec) -> None:
    table, parts = spec.table, spec.partitions
    if parts.kind not in PARTITION_KINDS:
        raise fail(table, "partitions.kind", f"{parts.kind!r} is not one of {', '.join(PARTITION_KINDS)}")
    check_timezone(spec)
    if parts.kind == "none":
        if parts.mapping:
            raise fail(table, "partitions.mapping", "given for an unpartitioned asset; set partitions.kind")
        return
    if parts.kind == "static":
        if not parts.keys:
            raise fail(table, "partitions.keys", "static partitions need at least one key")
        if len(parts.mapping) > 1:
            raise fail(table, "partitions.mapping", "a static key maps to one Paimon column")
    elif not parts.start:
        raise fail(table, "partitions.start", f"{parts.kind} partitions need a start date (YYYY-MM-DD)")
    if not spec.partition_keys:
        raise fail(table, "partitions", f"the asset has {parts.kind} partitions but the table has no "
                    "partition_keys to write them to; add e.g. partition_keys: [dt]")
    if not parts.mapping and len(spec.partition_keys) != 1:
        raise fail(table, "partitions.mapping", f"the table is partitioned by {list(spec.partition_keys)}; "
                    "say which column(s) the Dagster key maps to, e.g. {dt: '%Y-%m-%d'}")
    unknown = [c for c in parts.mapping if c not in spec.partition_keys]
    if unknown:
        raise fail(table, "partitions.mapping", f"{unknown} are not partition keys of the table "
                    f"({list(spec.partition_keys)})")
    try:
        definition = spec.partitions_def()
    except (dg.DagsterInvalidDefinitionError, ValueError, TypeError) as exc:
        raise fail(table, "partitions", str(exc).splitlines()[0]) from None
    if isinstance(definition, dg.TimeWindowPartitionsDefinition) and (
            definition.get_first_partition_window() is None):
        raise fail(table, "partitions.end", f"{parts.end} leaves no partition after {parts.start}")
    try:
        spec.partition_mapping()
    except PartitionMappingError as exc:
        raise TableDefinitionError(str(exc)) from None


def check_ingestion(spec: PaimonTableSpec) -> None:
    table, ingestion = spec.table, spec.ingestion
    if ingestion is None:
        return
    if ingestion.mode not in WRITE_MODES:
        raise fail(table, "ingestion.mode", f"{ingestion.mode!r} is not one of {', '.join(WRITE_MODES)}")
    if ingestion.mode == "upsert" and not spec.primary_key:
        raise fail(table, "ingestion.mode", "upsert needs a primary key; use append or overwrite, or "
                    "declare primary_key")
    if (ingestion.function is None) == (ingestion.landing is None):
        raise fail(table, "ingestion", "give exactly one of function (your code returns the data) and "
                    "landing (files under a path)")
    ingestion.resolved_function(table)
    if ingestion.changes_of is not None:
        if ingestion.landing is not None or ingestion.inputs:
            raise fail(table, "ingestion.changes_of", "a changes consumer gets its rows from the source table's "
                        "changes; drop landing and inputs")
        if ingestion.mode != "append" or spec.partitions.kind != "none":
            raise fail(table, "ingestion.changes_of", "change batches are appended, each once, to an "
                        "unpartitioned asset: set mode append and no partitions (the table may still have "
                        "partition_keys)")
    if ingestion.executor is not None:
        executor_named(ingestion.executor, ingestion.executor_config, table=table)
    elif ingestion.executor_config:
        raise fail(table, "ingestion.executor_config", "given without ingestion.executor; name the executor")
    check_workers(spec)
    check_backfill(spec)
    check_durations(spec)
    if ingestion.commit_every_rows < 0:
        raise fail(table, "ingestion.commit_every_rows", f"must be >= 0, got {ingestion.commit_every_rows}")
    if ingestion.extra_columns not in EXTRA_COLUMNS:
        raise fail(table, "ingestion.extra_columns", f"{ingestion.extra_columns!r} is not one of "
                   f"{', '.join(EXTRA_COLUMNS)} (refuse: data with columns the table does not have fails, naming "
                   "them; ignore: such columns are dropped)")
    if ingestion.landing is not None:
        if ingestion.mode == "append":
            raise fail(table, "ingestion.mode", "a landing location is ingested per partition with overwrite "
                        "(or upsert), so re-running a partition never ingests its files twice")
        try:
            ingestion.landing.validate(table=table, partitioned=spec.partitions.kind != "none",
                                       columns=spec.partition_keys)
        except LandingError as exc:
            raise TableDefinitionError(str(exc)) from None
    for name, value, low in (("sensor_interval_seconds", ingestion.sensor_interval_seconds, 1),
                             ("lookback", ingestion.lookback, 1), ("retries", ingestion.retries, 0),
                             ("schedule_minute", ingestion.schedule_minute, 0)):
        if value < low:
            raise fail(table, f"ingestion.{name}", f"must be at least {low}, got {value}")
    if ingestion.schedule and not isinstance(spec.partitions_def(), dg.TimeWindowPartitionsDefinition):
        raise fail(table, "ingestion.schedule", "a schedule materializes time partitions as they end; the "
                    f"asset has {spec.partitions.kind} partitions")


def check_workers(spec: PaimonTableSpec) -> None:
    ingestion = spec.ingestion
    assert ingestion is not None
    if ingestion.fan_out not in FAN_OUTS:
        raise fail(spec.table, "ingestion.fan_out", f"{ingestion.fan_out!r} is not one of {', '.join(FAN_OUTS)}")
    if ingestion.workers == 1:
        return
    if ingestion.workers < 1:
        raise fail(spec.table, "ingestion.workers", f"must be at least 1, got {ingestion.workers}")
    if ingestion.changes_of is not None or ingestion.commit_every_rows:
        raise fail(spec.table, "ingestion.workers", "a fanned-out partition is one commit: drop changes_of "
                    "or commit_every_rows, or keep workers at 1")
    function = ingestion.resolved_function(spec.table)
    if spec.bucketless_append and function is not None and \
            SLICE_PARAMETER not in inspect.signature(function).parameters:
        raise fail(spec.table, "ingestion.workers", f"the table has no buckets, so each write step needs its own "
                    f"share of the input: give the function a parameter {SLICE_PARAMETER!r} (it receives the "
                    "step's index and count), or keep workers at 1")


def check_durations(spec: PaimonTableSpec) -> None:
    """Durations Dagster's freshness policy takes (at least a minute, the warning before the failure),
    and a partition's runtime bound (at least a minute)."""
    ingestion = spec.ingestion
    assert ingestion is not None
    windows: dict[str, int] = {}
    for name in ("fresh_within", "warn_within"):
        text = getattr(ingestion, name)
        if text is None:
            continue
        try:
            windows[name] = pc.parse_duration_ms(text)
        except ValueError as exc:
            raise fail(spec.table, f"ingestion.{name}", f"{exc}; e.g. '26 h', '90 min', '2 d'") from None
        if windows[name] < FRESHNESS_MIN_MS:
            raise fail(spec.table, f"ingestion.{name}", f"{text!r} is under a minute, the least Dagster's "
                       "freshness evaluates")
    if ingestion.partition_runtime is not None:
        try:
            runtime = pc.parse_duration_ms(ingestion.partition_runtime)
        except ValueError as exc:
            raise fail(spec.table, "ingestion.partition_runtime", f"{exc}; e.g. '2 h', '30 min'") from None
        if runtime < FRESHNESS_MIN_MS:
            raise fail(spec.table, "ingestion.partition_runtime", f"{ingestion.partition_runtime!r} is under a "
                       "minute: live writes would be failed as dead")
    if "warn_within" in windows:
        if "fresh_within" not in windows:
            raise fail(spec.table, "ingestion.warn_within", "given without ingestion.fresh_within, the window "
                       "after which the asset fails its freshness")
        if windows["warn_within"] >= windows["fresh_within"]:
            raise fail(spec.table, "ingestion.warn_within", f"{ingestion.warn_within!r} is not shorter than "
                       f"fresh_within {ingestion.fresh_within!r}")


def check_backfill(spec: PaimonTableSpec) -> None:
    """What a run writing a range of partitions (each in turn, its own commit) cannot do."""
    ingestion = spec.ingestion
    assert ingestion is not None
    if ingestion.backfill_policy not in BACKFILL_POLICIES:
        raise fail(spec.table, "ingestion.backfill_policy", f"{ingestion.backfill_policy!r} is not one of "
                   f"{', '.join(BACKFILL_POLICIES)}")
    if ingestion.max_partitions_per_run < 1:
        raise fail(spec.table, "ingestion.max_partitions_per_run", f"must be at least 1, got "
                   f"{ingestion.max_partitions_per_run}")
    if ingestion.backfill_policy == "single_run" and ingestion.max_partitions_per_run != 1:
        raise fail(spec.table, "ingestion.max_partitions_per_run", "a single_run backfill puts the whole range in "
                   "one run; drop max_partitions_per_run or use backfill_policy multi_run")
    if not ingestion.ranged():
        return
    field = "ingestion.backfill_policy" if ingestion.backfill_policy == "single_run" else \
        "ingestion.max_partitions_per_run"
    if spec.partitions.kind == "none":
        raise fail(spec.table, field, "the asset has no partitions to put several in one run")
    # Each of these is a limit of a run writing partitions in turn, not of the declaration.
    for given, why in ((ingestion.inputs, "inputs (Dagster loads an input for the whole range at once, and "
                        "each partition's function must get its own)"),
                       (ingestion.commit_every_rows, "commit_every_rows (a later run could not resume one "
                        "partition's unfinished chunks of a run that wrote a range)")):
        if given:
            raise fail(spec.table, field, f"a run of several partitions cannot have {why}; keep one partition "
                       "per run for this table")


def check_threshold(spec: PaimonTableSpec, options: pc.TableOptions) -> None:
    """A sensor threshold below the picker's trigger would launch runs that find nothing to do."""
    threshold = spec.compaction.level0_threshold
    if threshold is None:
        return
    trigger, name = ((options.sorted_run_compaction_trigger, "num-sorted-run.compaction-trigger")
                     if spec.primary_key else (options.compaction_min_file_num, "compaction.min.file-num"))
    if threshold < trigger:
        raise fail(spec.table, "compaction.level0_threshold",
                    f"{threshold} is below the table's compaction trigger {trigger} ({name}), so the runs it "
                    f"launches would find nothing to compact; set the option {name} to {threshold} instead")


def check_compaction(spec: PaimonTableSpec) -> None:
    table, compaction = spec.table, spec.compaction
    if compaction.job not in COMPACTION_JOBS:
        raise fail(table, "compaction.job", f"{compaction.job!r} is not one of {', '.join(COMPACTION_JOBS)}")
    if compaction.job == "full" and not spec.primary_key:
        raise fail(table, "compaction.job", "full compaction jobs are for primary-key tables; append tables "
                    "compact small files with the minor job")
    if compaction.level0_threshold is not None and compaction.level0_threshold < 1:
        raise fail(table, "compaction.level0_threshold", f"must be at least 1, got {compaction.level0_threshold}")
    if (compaction.interval_seconds is not None and compaction.interval_seconds < 1) or (
            compaction.follow_seconds is not None and compaction.follow_seconds < 0):
        raise fail(table, "compaction", "interval_seconds must be >= 1 and follow_seconds >= 0")
    if compaction.buckets_per_step < 0:
        raise fail(table, "compaction.buckets_per_step", f"must be >= 0, got {compaction.buckets_per_step}")
    if not compaction.sensor and spec.table_options().get("write-only") == "true":
        raise fail(table, "compaction.sensor", "off for a write-only table: nothing would ever compact it")


def check_maintenance(spec: PaimonTableSpec) -> None:
    table, maintenance = spec.table, spec.maintenance
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
            raise fail(table, f"maintenance.{name}", f"must be at least 1, got {value}")
    if (maintenance.retain_min and maintenance.retain_max and maintenance.retain_min > maintenance.retain_max):
        raise fail(table, "maintenance", f"retain_min {maintenance.retain_min} is above retain_max "
                    f"{maintenance.retain_max}")

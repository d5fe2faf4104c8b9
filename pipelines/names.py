"""Every name the integration gives a Dagster definition, derived from the table in one place.

A table ``db.t`` gets ``ingest_db_t_job``, ``compact_db_t_job``, ``land_db_t_sensor``,
``compact_db_t_sensor`` ...; the checks on every table's asset have fixed names. Every job is a
table's own, so any number of declarations (YAML components, Python calls) compose in one code
location. The builders, the demo, the tests and the benchmarks all call these functions, so a
name is spelled once: renaming a definition here renames it everywhere that looks it up.
"""

from __future__ import annotations

# The checks on a table's asset.
DATA_CHECK = "partition_valid"
LEVEL0_CHECK = "level0_below_stop_trigger"
SMALL_FILES_CHECK = "small_files"
RETENTION_CHECK = "snapshots_within_retention"
ORPHANS_CHECK = "no_orphan_files"
INSTANCE_CHECK = "instance_settings"

# The concurrency pool of a table's writers is this prefix and the table (``dagster.yaml`` gives
# every pool with it one slot).
POOL_PREFIX = "paimon-write/"


def suffix(table: str) -> str:
    """``db_t`` for ``db.t``: the part of every per-table definition name naming the table."""
    return table.replace(".", "_")


def ingestion_job(table: str) -> str:
    """The job writing one partition of the table and checking it."""
    return f"ingest_{suffix(table)}_job"


def ingestion_schedule(table: str) -> str:
    """The schedule materializing each finished time partition."""
    return f"ingest_{suffix(table)}_schedule"


def landing_sensor(table: str) -> str:
    """The sensor launching a partition's ingestion when its landed files change."""
    return f"land_{suffix(table)}_sensor"


def changes_sensor(table: str) -> str:
    """The sensor launching a changes consumer when its source has unread changes."""
    return f"changes_{suffix(table)}_sensor"


def compaction_sensor(table: str) -> str:
    """The sensor launching the compaction jobs on the table's level-0 threshold."""
    return f"compact_{suffix(table)}_sensor"


def watch_sensor(table: str) -> str:
    """The sensor failing a run that holds the table past its bound (:mod:`pipelines.watchdog`)."""
    return f"watch_{suffix(table)}_sensor"


def compaction_job(table: str) -> str:
    """The job of the table's minor compactions (level 0 folded into the levels)."""
    return f"compact_{suffix(table)}_job"


def full_compaction_job(table: str) -> str:
    """The job of the table's full compactions (and of its full-compaction changelog)."""
    return f"full_compact_{suffix(table)}_job"


def expire_job(table: str) -> str:
    """The job expiring the table's snapshots."""
    return f"expire_snapshots_{suffix(table)}_job"


def orphans_job(table: str) -> str:
    """The job removing the table's orphan files."""
    return f"remove_orphan_files_{suffix(table)}_job"


def expire_schedule(table: str) -> str:
    """The schedule of the table's snapshot expiry."""
    return f"expire_snapshots_{suffix(table)}"


def orphans_schedule(table: str) -> str:
    """The schedule of the table's orphan-file cleanup."""
    return f"remove_orphan_files_{suffix(table)}"


def pool(table: str) -> str:
    """The concurrency pool of the table's writers."""
    return f"{POOL_PREFIX}{table}"


def table_executor(executor: str, table: str) -> str:
    """An executor configured for one table's ingestion job."""
    return f"{executor}_{suffix(table)}"


def plan_writes_op(table: str) -> str:
    """The step of a fanned-out write that splits a partition's input among the write steps."""
    return f"{suffix(table)}_plan_writes"


def write_share_op(table: str) -> str:
    """The steps of a fanned-out write that each prepare their share's files."""
    return f"{suffix(table)}_write_share"


def commit_op(table: str) -> str:
    """The step of a fanned-out write that commits every share as one snapshot."""
    return f"{suffix(table)}_commit"

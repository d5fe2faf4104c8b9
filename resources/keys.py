"""Every tag, metadata and snapshot-property key the integration writes or reads, spelled once.

Both halves read these: ``resources/`` (the IO manager, the writes inside a step) and
``pipelines/`` (assets, sensors, jobs, checks built from a spec), as do the demo, the tests and
the benchmarks. Keys are ``paimon/...`` so they never collide with Dagster's ``dagster/...``.
"""

from __future__ import annotations

# ---- Resource keys -----------------------------------------------------------------------

# The keys the definitions bind the catalog and the IO manager to; source functions and user
# assets ask for the catalog by this name.
CATALOG_KEY = "paimon_catalog"
IO_MANAGER_KEY = "paimon_io_manager"


def catalog_key(catalog_name: str | None = None) -> str:
    """The catalog's resource key: ``paimon_catalog``, or ``paimon_catalog_<name>`` for a named
    catalog (a code location holding more than one warehouse)."""
    return CATALOG_KEY if catalog_name is None else f"{CATALOG_KEY}_{catalog_name}"


def io_manager_key(catalog_name: str | None = None) -> str:
    """The IO manager's resource key of the catalog named ``catalog_name`` (see :func:`catalog_key`)."""
    return IO_MANAGER_KEY if catalog_name is None else f"{IO_MANAGER_KEY}_{catalog_name}"

# ---- Run and op tags ---------------------------------------------------------------------

# Every run of a table's ingestion job carries TABLE_TAG=<db.table>; dagster.yaml allows one
# such run per table (runs launched otherwise are held back by the asset's pool instead).
TABLE_TAG = "paimon/table"
# Runs that compact a table carry COMPACTION_TAG=<db.table>; dagster.yaml allows one such run per
# table at a time. It is not the ingestion tag, so ingestion and compaction of one table run side
# by side: ingestion only adds files (write-only), compaction replaces them, and the engine lands
# both (an APPEND never conflicts with a COMPACT). The maintenance runs (snapshot expiry,
# orphan-file cleanup) carry it too, so they never run next to a compaction of the same table:
# the tag means "replaces or deletes the table's files".
COMPACTION_TAG = "paimon/compaction"
# What an op or job does to its table (ingest-overwrite, compact, expire-snapshots ...).
OPERATION_TAG = "paimon/operation"
# The level-0 file count that made the compaction sensor ask for the run, and the snapshot it saw
# (the changes sensor tags its runs with the source snapshot it saw too).
TRIGGER_LEVEL0_TAG = "paimon/trigger-level0"
TRIGGER_SNAPSHOT_TAG = "paimon/trigger-snapshot"
# Why the sensor asked for the run: "level0" (a bucket's level 0 reached the threshold) and/or
# "full-compaction-due" (full-compaction.delta-commits data commits since the last full
# compaction), comma-separated; and, for tables with scheduled full compactions, the commits
# since the last one over the interval ("5/5").
TRIGGER_REASON_TAG = "paimon/trigger-reason"
TRIGGER_COMMITS_TAG = "paimon/trigger-commits-since-full"
# Runs that keep compacting as writers commit (follow mode) say for how long.
FOLLOW_TAG = "paimon/compaction-follow"
# Dagster's per-run bound, enforced by the instance's run monitoring (pipelines.runtime_bounds).
MAX_RUNTIME_TAG = "dagster/max_runtime"
# How Dagster re-executes a run it retries (run_retries): FROM_FAILURE (its default) or ALL_STEPS.
RETRY_STRATEGY_TAG = "dagster/retry_strategy"
# A compaction run a sensor requested again after the run for the same table state failed: which retry.
RETRY_TAG = "paimon/compaction-retry"
# The consumer id a changes consumer's run reads as.
CONSUMER_TAG = "paimon/consumer"
# How many landed files the landing sensor saw for the partition it launched.
LANDED_FILES_TAG = "paimon/landed-files"
# Dagster's own tag of a run a sensor requested with a run key (read back to tell a landed
# partition's outcome).
RUN_KEY_TAG = "dagster/run_key"

# ---- Definition metadata of an asset -------------------------------------------------------

# The Paimon table of an asset (``db.table``), read by the IO manager and the maintenance runs.
TABLE_METADATA_KEY = "paimon/table"
# What a table's own compaction and maintenance jobs carry: the table, its asset, partition
# mapping and fan-out (JSON), so a run launched with nothing else works on it.
TARGET_METADATA_KEY = "paimon/target"
# How the IO manager writes an output: overwrite, append or upsert.
WRITE_MODE_METADATA_KEY = "paimon/write_mode"
# refuse or ignore input columns the table does not have.
EXTRA_COLUMNS_METADATA_KEY = "paimon/extra_columns"
# Whether an overwrite with no rows may empty a partition that holds rows.
ALLOW_EMPTY_METADATA_KEY = "paimon/allow_empty_partitions"
# How a Dagster partition key maps onto the table's Paimon partition values (JSON).
PARTITION_MAPPING_METADATA_KEY = "paimon/partition_mapping"
# What the asset page shows of the declaration.
PRIMARY_KEY_METADATA_KEY = "paimon/primary_key"
PARTITION_KEYS_METADATA_KEY = "paimon/partition_keys"
OPTIONS_METADATA_KEY = "paimon/options"
CONSUMERS_METADATA_KEY = "paimon/consumers"
AUTOMATION_METADATA_KEY = "paimon/automation"

# ---- Snapshot properties -------------------------------------------------------------------

# Stored in every snapshot a step commits, so a snapshot tells which run and asset wrote it.
RUN_ID_PROPERTY = "dagster.run_id"
ASSET_KEY_PROPERTY = "dagster.asset_key"
WRITE_MODE_PROPERTY = "dagster.write_mode"
PARTITION_PROPERTY = "dagster.partition"

# ---- Materialization and observation metadata ----------------------------------------------

# ---- What a changes consumer's step reports: the source's snapshots it read and the change rows.
CHANGES_COMMITS = "paimon/changes/commits"
CHANGES_CONSUMER_ID = "paimon/changes/consumer_id"
CHANGES_CONSUMER_NEXT_SNAPSHOT = "paimon/changes/consumer_next"
CHANGES_FULL_READ = "paimon/changes/full_read"
CHANGES_PREVIEW = "paimon/changes/preview"
CHANGES_REPLAYED_BATCHES = "paimon/changes/replayed_batches"
CHANGES_SNAPSHOTS_CONSUMED = "paimon/changes/snapshots_read"
CHANGES_SOURCE = "paimon/changes/source"
CHANGES_SOURCE_SNAPSHOTS = "paimon/changes/source_snapshots"
CHANGES_STARTED_FROM = "paimon/changes/started_from"

# ---- What a compaction step reports on the table's asset (observations), per partition it compacted.
COMPACTION_BUCKETS = "paimon/compact/buckets"
COMPACTION_BUCKETS_COMPACTED = "paimon/compact/bucket_count"
COMPACTION_BYTES_IN = "paimon/compact/bytes_in"
COMPACTION_BYTES_OUT = "paimon/compact/bytes_out"
COMPACTION_CHANGELOG_FILES = "paimon/compact/changelog_files"
COMPACTION_CHANGELOG_ROWS = "paimon/compact/changelog_rows"
COMPACTION_CONFLICTS = "paimon/compact/conflicts"
COMPACTION_DURATION_S = "paimon/compact/duration_s"
COMPACTION_FILES_IN = "paimon/compact/files_in"
COMPACTION_FILES_OUT = "paimon/compact/files_out"
COMPACTION_LEVEL0_FILES_AFTER = "paimon/compact/l0_files_after"
COMPACTION_LEVEL0_FILES_BEFORE = "paimon/compact/l0_files_before"
COMPACTION_PARTITION = "paimon/compact/partition"
COMPACTION_PARTITIONS = "paimon/compact/partitions"
COMPACTION_PEAK_RSS_MIB = "paimon/compact/peak_rss_mib"
COMPACTION_ROWS_IN = "paimon/compact/rows_in"
COMPACTION_ROWS_OUT = "paimon/compact/rows_out"
COMPACTION_SNAPSHOT_ID = "paimon/compact/snapshot_id"
COMPACTION_TABLE = "paimon/compact/table"

# ---- What an ingestion step reports with its materialization (plotted per partition where numeric).
INGEST_COMMIT_KIND = "paimon/ingest/commit_kind"
INGEST_COMMITS = "paimon/ingest/commits"
INGEST_DELETES = "paimon/ingest/deletes"
INGEST_FILES = "paimon/ingest/files"
INGEST_INSERTS = "paimon/ingest/inserts"
INGEST_MODE = "paimon/ingest/mode"
INGEST_OPTIONS_CHANGED = "paimon/ingest/options_changed"
INGEST_REUSED_COMMIT = "paimon/ingest/reused_commit"
INGEST_RUN_PARTITIONS = "paimon/ingest/run_partitions"  # a ranged run: its first and last partition
INGEST_ROW_COUNT_SOURCE = "paimon/ingest/row_count_source"
INGEST_ROWS_PER_STEP = "paimon/ingest/rows_per_step"
INGEST_ROWS_WRITTEN = "paimon/ingest/rows_written"
INGEST_SLOWEST_STEP_S = "paimon/ingest/slowest_step_s"
INGEST_SNAPSHOT_ID = "paimon/ingest/snapshot_id"
INGEST_UPDATE_AFTERS = "paimon/ingest/update_afters"
INGEST_UPDATE_BEFORES = "paimon/ingest/update_befores"
INGEST_WRITE_STEPS = "paimon/ingest/write_steps"

# ---- The table's LSM shape, recorded with every write and after every compaction.
LSM_BYTES = "paimon/lsm/bytes"
LSM_DEBT_BYTES = "paimon/lsm/debt_bytes"
LSM_FILES = "paimon/lsm/files"
LSM_MAX_LEVEL0_FILES = "paimon/lsm/max_level0_files"
LSM_SNAPSHOT_ID = "paimon/lsm/snapshot_id"

# ---- What the expiry and orphan-cleanup runs report on the table's asset.
MAINTENANCE_AUTOMATIC_TAG_CREATED = "paimon/maint/tag_created"
MAINTENANCE_AUTOMATIC_TAGS_DELETED = "paimon/maint/tags_deleted"
MAINTENANCE_BYTES = "paimon/maint/bytes"
MAINTENANCE_CHANGELOG_FILES = "paimon/maint/changelog_files"
MAINTENANCE_CHANGELOGS_KEPT = "paimon/maint/changelogs_kept"
MAINTENANCE_CONSUMERS = "paimon/maint/consumers"
MAINTENANCE_DATA_FILES = "paimon/maint/data_files"
MAINTENANCE_DRY_RUN = "paimon/maint/dry_run"
MAINTENANCE_DURATION_S = "paimon/maint/duration_s"
MAINTENANCE_EARLIEST_SNAPSHOT_AFTER = "paimon/maint/earliest_after"
MAINTENANCE_EARLIEST_SNAPSHOT_BEFORE = "paimon/maint/earliest_before"
MAINTENANCE_EXPIRED_SNAPSHOTS = "paimon/maint/expired_ids"
MAINTENANCE_FILES = "paimon/maint/files"
MAINTENANCE_FILES_OLDER_THAN_WINDOW = "paimon/maint/old_files"
MAINTENANCE_FORCED = "paimon/maint/forced"
MAINTENANCE_INDEX_FILES = "paimon/maint/index_files"
MAINTENANCE_LATEST_SNAPSHOT = "paimon/maint/latest"
MAINTENANCE_LONG_LIVED_CHANGELOGS_EXPIRED = "paimon/maint/changelogs_gone"
MAINTENANCE_METADATA_FILES = "paimon/maint/metadata_files"
MAINTENANCE_OLDER_THAN = "paimon/maint/older_than"
MAINTENANCE_ORPHAN_FILES = "paimon/maint/orphan_files"
MAINTENANCE_ORPHANS = "paimon/maint/orphans"
MAINTENANCE_SNAPSHOTS_EXPIRED = "paimon/maint/expired"
MAINTENANCE_SNAPSHOTS_RETAINED_AFTER = "paimon/maint/retained_after"
MAINTENANCE_SNAPSHOTS_RETAINED_BEFORE = "paimon/maint/retained_before"
MAINTENANCE_STALE_CONSUMERS_REMOVED = "paimon/maint/consumers_gone"
MAINTENANCE_TABLE = "paimon/maint/table"

# Row kinds (Paimon's +I, -U, +U, -D) to the keys counting them in a write and in a change batch.
INGEST_KIND_KEYS = {"+I": INGEST_INSERTS, "-U": INGEST_UPDATE_BEFORES, "+U": INGEST_UPDATE_AFTERS, "-D": INGEST_DELETES}
CHANGES_INSERTS = "paimon/changes/inserts"
CHANGES_UPDATE_BEFORES = "paimon/changes/update_befores"
CHANGES_UPDATE_AFTERS = "paimon/changes/update_afters"
CHANGES_DELETES = "paimon/changes/deletes"
CHANGES_KIND_KEYS = {"+I": CHANGES_INSERTS, "-U": CHANGES_UPDATE_BEFORES, "+U": CHANGES_UPDATE_AFTERS,
                     "-D": CHANGES_DELETES}
# Every key of one kind of run starts so.
LSM_PREFIX = "paimon/lsm/"
CHANGES_PREFIX = "paimon/changes/"
MAINTENANCE_PREFIX = "paimon/maint/"


def lsm_level_files(level: int) -> str:
    """The key of the number of files at one LSM level over all buckets."""
    return f"{LSM_PREFIX}level{level}_files"


# Kinds of files whose key names them shorter (keys stay short enough to read beside their value).
SHORT_KINDS = {"statistics": "stats"}


def maintenance_files(kind: str) -> str:
    """The key of the number of orphan files of one kind (data, manifest, index ...) a cleanup found."""
    return f"{MAINTENANCE_PREFIX}{SHORT_KINDS.get(kind, kind)}_files"

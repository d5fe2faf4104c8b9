"""Table options: every Paimon key we honour, declared once with its type, default and effect.

Options live in the schema file as a ``str -> str`` map. :meth:`TableOptions.from_map` parses
the keys we know (raising :class:`OptionError` on a bad value) and keeps the whole map, so keys
we do not know are written back unchanged.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from paimon_core.errors import OptionError

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
INT_MAX = 2**31 - 1

_MEMORY_UNITS: dict[str, float] = {
    "": 1, "b": 1, "bytes": 1,
    "k": KiB, "kb": KiB, "kibibytes": KiB,
    "m": MiB, "mb": MiB, "mebibytes": MiB,
    "g": GiB, "gb": GiB, "gibibytes": GiB,
    "t": 1024 * GiB, "tb": 1024 * GiB, "tebibytes": 1024 * GiB,
}
_DURATION_MS: dict[str, float] = {
    "": 1.0, "ms": 1.0, "milli": 1.0, "millis": 1.0, "millisecond": 1.0, "milliseconds": 1.0,
    "ns": 1e-6, "nanos": 1e-6, "us": 1e-3, "micros": 1e-3,
    "s": 1000.0, "sec": 1000.0, "secs": 1000.0, "second": 1000.0, "seconds": 1000.0,
    "m": 60_000.0, "min": 60_000.0, "mins": 60_000.0, "minute": 60_000.0, "minutes": 60_000.0,
    "h": 3_600_000.0, "hour": 3_600_000.0, "hours": 3_600_000.0,
    "d": 86_400_000.0, "day": 86_400_000.0, "days": 86_400_000.0,
}
_NUMBER_UNIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def _number_with_unit(text: str, units: dict[str, float], example: str) -> float:
    match = _NUMBER_UNIT.match(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in units:
        raise ValueError(f"{text!r} has no recognised unit (use e.g. {example})")
    return float(match.group(1)) * units[unit]


def parse_memory_size(text: str) -> int:
    """Parse a Paimon memory size such as ``256 mb`` or ``64kb`` into bytes (binary units)."""
    return int(_number_with_unit(text, _MEMORY_UNITS, "'256 mb', '64 kb', '1 gb'"))


def parse_duration_ms(text: str) -> int:
    """Parse a Paimon duration such as ``1 h``, ``10 s`` or ``500ms`` into milliseconds."""
    return int(_number_with_unit(text, _DURATION_MS, "'10 s', '1 h', '500 ms'"))


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"not a boolean: {text!r} (use 'true' or 'false')")
    return lowered == "true"


def _parse_int(text: str) -> int:
    return int(text.strip())


def _parse_ratio(text: str) -> float:
    value = float(text.strip())
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{text!r} is not a ratio between 0 and 1")
    return value


def _parse_str(text: str) -> str:
    return text


def _parse_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        lowered = text.strip().lower()
        if lowered not in allowed:
            raise ValueError(f"{text!r} is not one of {', '.join(allowed)}")
        return lowered

    return parse


# Codecs both Java Paimon and pyarrow write, per format. Java passes the name to Parquet's
# CompressionCodecName / ORC's CompressionKind, so ORC has no "gzip" (its deflate codec is zlib)
# and Parquet no "zlib"; pyarrow writes no LZO. Other names Java knows are still read.
WRITABLE_CODECS: dict[str, tuple[str, ...]] = {
    "parquet": ("zstd", "snappy", "gzip", "lz4", "brotli", "none", "uncompressed"),
    "orc": ("zstd", "snappy", "zlib", "lz4", "none", "uncompressed"),
}
_CODEC_TWINS = {("orc", "gzip"): "zlib", ("parquet", "zlib"): "gzip"}


def codec_problem(file_format: str, codec: str) -> str | None:
    """Why ``file.compression = codec`` cannot be written in ``file_format`` files, or None."""
    if codec in WRITABLE_CODECS[file_format]:
        return None
    twin = _CODEC_TWINS.get((file_format, codec))
    hint = f"use {twin!r} (the same deflate codec)" if twin else f"use one of {', '.join(WRITABLE_CODECS[file_format])}"
    return f"file.compression {codec!r} cannot be written in {file_format} files: {hint}"


def _at_least(minimum: int, parse: Callable[[str], int] = _parse_int) -> Callable[[str], int]:
    def parse_checked(text: str) -> int:
        value = parse(text)
        if value < minimum:
            raise ValueError(f"{text!r} is below the minimum {minimum}")
        return value

    return parse_checked


def _parse_bucket(text: str) -> int:
    value = int(text.strip())
    if value == 0 or value < -2:
        raise ValueError(f"bucket must be > 0, -1 (dynamic/unaware) or -2 (postpone), got {text!r}")
    return value


@dataclass(frozen=True, slots=True)
class StatsMode:
    """How much column statistics a data file's manifest entry carries (``metadata.stats-mode``)."""

    kind: str  # "none" | "counts" | "truncate" | "full"
    length: int = 0  # characters/bytes kept for truncate

    @staticmethod
    def parse(text: str) -> StatsMode:
        lowered = text.strip().lower()
        if lowered in ("none", "counts", "full"):
            return StatsMode(lowered)
        match = re.fullmatch(r"truncate\((\d+)\)", lowered)
        if match and int(match.group(1)) > 0:
            return StatsMode("truncate", int(match.group(1)))
        raise ValueError(f"{text!r} is not none, counts, full or truncate(N) with N > 0")

    @property
    def collects_min_max(self) -> bool:
        return self.kind in ("truncate", "full")

    @property
    def collects_anything(self) -> bool:
        return self.kind != "none"


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """Metadata of one option: Paimon key, default, parser and documentation."""

    key: str
    default: Any
    doc: str
    parse: Callable[[str], Any]
    shown: str | None = None  # the default as Paimon spells it, when not the plain value


def opt(key: str, default: Any, doc: str, parse: Callable[[str], Any], shown: str | None = None) -> Any:
    """Declare a TableOptions field bound to a Paimon option key."""
    return field(default=default, metadata={"spec": OptionSpec(key, default, doc, parse, shown)})


_FIELD_OPTION = re.compile(r"^fields\.(.+)\.([a-z-]+(?:\.[a-z-]+)*)$")
_FIELD_OPTION_PARSERS: dict[str, Callable[[str], Any]] = {"stats-mode": StatsMode.parse}


@dataclass(frozen=True, slots=True)
class TableOptions:
    """Parsed table options. Construct with :meth:`from_map`; ``raw`` keeps every key as given."""

    # --- layout and buckets -------------------------------------------------------------
    bucket: int = opt("bucket", -1, "Fixed bucket count (> 0); -1 unaware (append) or dynamic (PK); "
                      "-2 postpone.", _parse_bucket)
    bucket_key: tuple[str, ...] = opt("bucket-key", (), "Columns hashed to pick a fixed bucket; "
                                      "defaults to the trimmed primary key.", _parse_list)
    partition_default_name: str = opt("partition.default-name", "__DEFAULT_PARTITION__",
                                      "Directory name used for a null or blank partition value.",
                                      _parse_str)
    partition_legacy_name: bool = opt("partition.legacy-name", True,
                                      "Partition directories use the value's internal string form "
                                      "(e.g. DATE as a day number) as Java does by default.", _parse_bool)
    data_file_prefix: str = opt("data-file.prefix", "data-", "File-name prefix of data files.",
                                _parse_str)
    changelog_file_prefix: str = opt("changelog-file.prefix", "changelog-",
                                     "File-name prefix of changelog files.", _parse_str)
    # --- file format ---------------------------------------------------------------------
    file_format: str = opt("file.format", "parquet", "Data file format: parquet or orc.",
                           _choice("parquet", "orc"))
    file_compression: str = opt("file.compression", "zstd",
                                "Compression codec inside data files (Parquet: zstd, snappy, gzip, lz4, brotli, "
                                "none; ORC: zstd, snappy, zlib, lz4, none).",
                                _choice(*sorted({c for codecs in WRITABLE_CODECS.values() for c in codecs}
                                                | {"lzo", "lz4_raw"})))
    file_compression_zstd_level: int = opt("file.compression.zstd-level", 1,
                                           "zstd level for data files; higher is smaller and slower.",
                                           _parse_int)
    target_file_size: int | None = opt("target-file-size", None,
                                       "Rolling size of data files; default 128 mb for primary-key "
                                       "tables and 256 mb for append tables.", parse_memory_size)
    # --- write path ----------------------------------------------------------------------
    write_buffer_size: int = opt("write-buffer-size", 256 * MiB,
                                 "Memory for buffered rows of one writer before they are flushed; "
                                 "bounds write memory.", _at_least(1, parse_memory_size), shown="256 mb")
    write_buffer_spillable: bool = opt("write-buffer-spillable", True,
                                       "Spill sorted runs to local disk instead of writing a file "
                                       "when the buffer is full.", _parse_bool)
    write_only: bool = opt("write-only", False,
                           "Writers never compact or expire; a dedicated job does maintenance.",
                           _parse_bool)
    dynamic_partition_overwrite: bool = opt("dynamic-partition-overwrite", True,
                                            "overwrite=True replaces only partitions present in the "
                                            "new data; false replaces the whole table.", _parse_bool)
    ignore_empty_commit: bool = opt("snapshot.ignore-empty-commit", True,
                                    "A commit without changes creates no snapshot.", _parse_bool)
    commit_user_prefix: str | None = opt("commit.user-prefix", None,
                                         "Prefix put before the generated commit user.", _parse_str)
    # --- primary-key tables --------------------------------------------------------------
    merge_engine: str = opt("merge-engine", "deduplicate", "How rows of one key are merged.",
                            _choice("deduplicate", "partial-update", "aggregation", "first-row"))
    changelog_producer: str = opt("changelog-producer", "none", "Which changelog a table produces.",
                                  _choice("none", "input", "lookup", "full-compaction"))
    changelog_row_deduplicate: bool = opt("changelog-producer.row-deduplicate", False,
                                          "lookup / full-compaction: leave out -U/+U pairs whose "
                                          "values are equal.", _parse_bool)
    changelog_row_deduplicate_ignore_fields: tuple[str, ...] = opt(
        "changelog-producer.row-deduplicate-ignore-fields", (),
        "Fields not compared by row-deduplicate (e.g. an update timestamp).", _parse_list)
    sequence_field: tuple[str, ...] = opt("sequence.field", (),
                                          "User columns that order updates before the system "
                                          "sequence number.", _parse_list)
    sequence_field_sort_order: str = opt("sequence.field.sort-order", "ascending",
                                         "Whether larger or smaller sequence.field values are newer.",
                                         _choice("ascending", "descending"))
    rowkind_field: str | None = opt("rowkind.field", None,
                                    "String column holding each row's kind (+I/-U/+U/-D).", _parse_str)
    ignore_delete: bool = opt("ignore-delete", False, "Drop -D/-U rows at write and in merges.",
                              _parse_bool)
    ignore_update_before: bool = opt("ignore-update-before", False, "Drop -U rows at write.", _parse_bool)
    partial_update_remove_record_on_delete: bool = opt(
        "partial-update.remove-record-on-delete", False,
        "A -D removes the whole row in partial-update.", _parse_bool)
    aggregation_remove_record_on_delete: bool = opt(
        "aggregation.remove-record-on-delete", False,
        "A -D removes the whole row in aggregation.", _parse_bool)
    default_aggregate_function: str | None = opt("fields.default-aggregate-function", None,
                                                 "Aggregate function of fields without their own.",
                                                 _parse_str)
    dynamic_bucket_target_row_num: int = opt("dynamic-bucket.target-row-num", 2_000_000,
                                             "Rows per dynamic bucket before a new one opens.",
                                             _at_least(1))
    deletion_vectors_enabled: bool = opt("deletion-vectors.enabled", False,
                                         "Merge-on-write through deletion vectors.", _parse_bool)
    deletion_vectors_merge_on_read: bool = opt("deletion-vectors.merge-on-read", False,
                                               "Batch reads of deletion-vector tables merge level 0 too "
                                               "(uncompacted rows visible, slower reads).", _parse_bool)
    # --- compaction ----------------------------------------------------------------------
    sorted_run_compaction_trigger: int = opt("num-sorted-run.compaction-trigger", 5,
                                             "Sorted runs that start a compaction; lower reads "
                                             "faster and rewrites more.", _at_least(1))
    sorted_run_stop_trigger_option: int | None = opt("num-sorted-run.stop-trigger", None,
                                                     "Sorted runs that stall writes; default "
                                                     "trigger + 3.", _at_least(1))
    num_levels_option: int | None = opt("num-levels", None, "LSM levels; default trigger + 1.",
                                        _at_least(2))
    max_size_amplification_percent: int = opt("compaction.max-size-amplification-percent", 200,
                                              "Size amplification that forces a full compaction.",
                                              _at_least(0))
    compaction_size_ratio: int = opt("compaction.size-ratio", 1,
                                     "Percent slack when grouping runs of similar size.",
                                     _at_least(0))
    compaction_min_file_num: int = opt("compaction.min.file-num", 5,
                                       "Minimum small files before an append compaction.",
                                       _at_least(1))
    split_open_file_cost: int = opt("source.split.open-file-cost", 4 * MiB,
                                    "Cost of opening a file, in bytes, when packing files into work.",
                                    parse_memory_size, shown="4 mb")
    compaction_small_file_ratio: float = opt("compaction.small-file-ratio", 0.7,
                                             "Files below target-file-size times this are rewritten; "
                                             "bigger ones only change level.", _parse_ratio)
    compaction_force_rewrite_all_files: bool = opt("compaction.force-rewrite-all-files", False,
                                                   "Rewrite every picked file instead of moving big "
                                                   "ones up a level.", _parse_bool)
    compaction_optimization_interval_ms: int | None = opt(
        "compaction.optimization-interval", None,
        "Run a full compaction at least this often (read-optimized freshness).", parse_duration_ms)
    full_compaction_delta_commits: int | None = opt("full-compaction.delta-commits", None,
                                                    "Full compaction every N commits.", _at_least(1))
    lookup_wait: bool = opt("lookup-wait", True, "Commit waits for lookup compaction.", _parse_bool)
    lookup_compact: str = opt("lookup-compact", "radical",
                              "radical: force level 0 up at every trigger; gentle: only every "
                              "lookup-compact.max-interval.", _choice("radical", "gentle"))
    lookup_compact_max_interval_option: int | None = opt(
        "lookup-compact.max-interval", None,
        "gentle: level-0 runs (one per commit) before level 0 is forced up; default 2 x trigger.",
        _at_least(1))
    lookup_cache_max_memory_size: int = opt("lookup.cache-max-memory-size", 256 * MiB,
                                            "Memory for decoded row groups kept by Table.new_lookup(); "
                                            "least recently used ones are evicted.", parse_memory_size,
                                            shown="256 mb")
    lookup_cache_file_retention_ms: int = opt("lookup.cache-file-retention", 3_600_000,
                                              "Cached lookup data unused this long is dropped.",
                                              parse_duration_ms, shown="1 h")
    commit_force_compact: bool = opt("commit.force-compact", False,
                                     "Compact before every commit.", _parse_bool)
    # --- snapshots, changelog, manifests --------------------------------------------------
    snapshot_num_retained_min: int = opt("snapshot.num-retained.min", 10,
                                         "Snapshots always kept by expiry.", _at_least(1))
    snapshot_num_retained_max: int = opt("snapshot.num-retained.max", INT_MAX,
                                         "Hard cap on retained snapshots.", _at_least(1), shown="Integer.MAX_VALUE")
    snapshot_time_retained_ms: int = opt("snapshot.time-retained", 3_600_000,
                                         "Snapshots younger than this are kept.", parse_duration_ms, shown="1 h")
    snapshot_expire_limit: int = opt("snapshot.expire.limit", 50,
                                     "Most snapshots expired in one run.", _at_least(1))
    changelog_num_retained_min: int | None = opt("changelog.num-retained.min", None,
                                                 "Changelogs always kept; default the snapshot "
                                                 "value.", _at_least(1))
    changelog_num_retained_max: int | None = opt("changelog.num-retained.max", None,
                                                 "Cap on retained changelogs; default the "
                                                 "snapshot value.", _at_least(1))
    changelog_time_retained_ms: int | None = opt("changelog.time-retained", None,
                                                 "Changelog age kept; default the snapshot value.",
                                                 parse_duration_ms)
    manifest_target_file_size: int = opt("manifest.target-file-size", 8 * MiB,
                                         "Rolling and merge size of manifest files.",
                                         _at_least(1, parse_memory_size), shown="8 mb")
    manifest_merge_min_count: int = opt("manifest.merge-min-count", 30,
                                        "Small manifests in the tail before a minor merge.",
                                        _at_least(1))
    manifest_full_compaction_threshold_size: int = opt(
        "manifest.full-compaction-threshold-size", 16 * MiB,
        "Size of must-change manifests that triggers a full manifest rewrite.", parse_memory_size, shown="16 mb")
    manifest_compression: str = opt("manifest.compression", "zstd",
                                    "Avro codec of manifests and manifest lists.",
                                    _choice("zstd", "null", "deflate", "snappy", "bzip2", "xz"))
    manifest_delete_file_drop_stats: bool = opt("manifest.delete-file-drop-stats", False,
                                                "DELETE entries carry no stats (smaller manifests).",
                                                _parse_bool)
    # --- statistics ----------------------------------------------------------------------
    stats_mode: StatsMode = opt("metadata.stats-mode", StatsMode("truncate", 16),
                                "Column stats kept per data file: none, counts, truncate(N) or "
                                "full.", StatsMode.parse)
    stats_dense_store: bool = opt("metadata.stats-dense-store", True,
                                  "Store stats only for columns that have them, naming them.",
                                  _parse_bool)
    stats_keep_first_n_columns: int = opt("metadata.stats-keep-first-n-columns", -1,
                                          "Only the first N columns get stats; -1 keeps all.",
                                          _parse_int)
    # --- commit ----------------------------------------------------------------------------
    commit_max_retries: int = opt("commit.max-retries", 10,
                                  "Attempts after a lost race before the commit fails.", _at_least(0))
    commit_timeout_ms: int | None = opt("commit.timeout", None,
                                        "Give up retrying after this long; default unlimited.",
                                        parse_duration_ms)
    commit_min_retry_wait_ms: int = opt("commit.min-retry-wait", 10,
                                        "First backoff after a lost race.", parse_duration_ms, shown="10 ms")
    commit_max_retry_wait_ms: int = opt("commit.max-retry-wait", 10_000,
                                        "Longest backoff between commit attempts.", parse_duration_ms, shown="10 s")
    # --- reading and streaming -----------------------------------------------------------
    scan_mode: str = opt("scan.mode", "default", "Starting point of scans.",
                         _choice("default", "latest-full", "full", "latest", "compacted-full",
                                 "from-timestamp", "from-file-creation-time", "from-snapshot",
                                 "from-snapshot-full", "incremental"))
    continuous_discovery_interval_ms: int = opt("continuous.discovery-interval", 10_000,
                                                "Poll interval of streaming reads.",
                                                parse_duration_ms, shown="10 s")
    consumer_id: str | None = opt("consumer-id", None, "Streaming consumer whose progress is saved.",
                                  _parse_str)
    consumer_expiration_ms: int | None = opt("consumer.expiration-time", None,
                                             "Consumers idle longer than this stop pinning "
                                             "snapshots.", parse_duration_ms)
    partition_mark_done_action: tuple[str, ...] = opt(
        "partition.mark-done-action", ("success-file",),
        "How a partition is marked done: success-file writes <partition>/_SUCCESS (metastore and "
        "http actions are Java-only).", _parse_list, shown="success-file")
    partition_expiration_ms: int | None = opt("partition.expiration-time", None,
                                              "Partitions older than this are dropped.",
                                              parse_duration_ms)
    tag_automatic_creation: str = opt("tag.automatic-creation", "none",
                                      "process-time: tag each finished period (its last snapshot).",
                                      _choice("none", "process-time", "watermark", "batch"))
    tag_creation_period: str = opt("tag.creation-period", "daily", "Period of automatic tags.",
                                   _choice("daily", "hourly"))
    tag_creation_delay_ms: int = opt("tag.creation-delay", 0, "Wait this long after a period ends before "
                                     "tagging it (late commits).", parse_duration_ms, shown="0 ms")
    tag_period_formatter: str = opt("tag.period-formatter", "with_dashes",
                                    "Automatic tag names: 2024-01-31 (with_dashes) or 20240131.",
                                    _choice("with_dashes", "without_dashes"))
    tag_num_retained_max: int | None = opt("tag.num-retained-max", None,
                                           "Most automatic tags kept; older ones are deleted.", _at_least(1))
    sequence_number_init_mode: str = opt("write.sequence-number-init-mode", "scan",
                                         "How a writer restores its sequence counter.",
                                         _choice("scan", "snapshot"))

    raw: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_map(cls, options: Mapping[str, str], *, table: str = "") -> TableOptions:
        """Parse ``options``; raises :class:`OptionError` naming the table, key and value."""
        values: dict[str, Any] = {}
        where = f" of table {table}" if table else ""
        for spec_field in dataclasses.fields(cls):
            spec: OptionSpec | None = spec_field.metadata.get("spec")
            if spec is None or spec.key not in options:
                continue
            text = options[spec.key]
            if not isinstance(text, str):
                raise OptionError(f"option {spec.key!r}{where} must be a string, got {text!r}")
            try:
                values[spec_field.name] = spec.parse(text)
            except ValueError as exc:
                raise OptionError(f"bad value {text!r} for option {spec.key!r}{where}: {exc}") from None
        for key, text in options.items():
            _validate_field_option(key, text, where)
        if "ignore-delete" not in options:  # Paimon's fallback keys of ignore-delete
            for key in ("first-row.ignore-delete", "deduplicate.ignore-delete", "partial-update.ignore-delete"):
                if key in options:
                    try:
                        values["ignore_delete"] = _parse_bool(options[key])
                    except ValueError as exc:
                        raise OptionError(f"bad value {options[key]!r} for option {key!r}{where}: {exc}") from None
        return cls(**values, raw=dict(options))

    def to_map(self) -> dict[str, str]:
        """The options as stored in the schema file: exactly the keys that were set."""
        return dict(self.raw)

    def field_option(self, field_name: str, suffix: str) -> str | None:
        """The raw value of ``fields.<field_name>.<suffix>``, if set."""
        return self.raw.get(f"fields.{field_name}.{suffix}")

    def field_stats_mode(self, field_name: str) -> StatsMode:
        """Stats mode of one column: its ``fields.<f>.stats-mode`` or the table mode."""
        own = self.field_option(field_name, "stats-mode")
        return StatsMode.parse(own) if own is not None else self.stats_mode

    def target_file_size_for(self, *, primary_key: bool) -> int:
        """Rolling size: the option if set, else Paimon's per-table-kind default."""
        if self.target_file_size is not None:
            return self.target_file_size
        return 128 * MiB if primary_key else 256 * MiB

    def compaction_file_size(self, *, primary_key: bool) -> int:
        """Files smaller than this are small: compaction rewrites them instead of moving them."""
        return int(self.target_file_size_for(primary_key=primary_key) * self.compaction_small_file_ratio)

    def batch_scan_skips_level0(self, *, primary_key: bool) -> bool:
        """Whether batch reads leave level-0 files out, as Java's ``batchScanSkipLevel0``:
        deletion-vector tables (unless ``deletion-vectors.merge-on-read``) and first-row tables
        show a written row once compaction has moved it out of level 0."""
        if not primary_key:
            return False
        if self.deletion_vectors_enabled:
            return not self.deletion_vectors_merge_on_read
        return self.merge_engine == "first-row"

    @property
    def sequence_descending(self) -> bool:
        return self.sequence_field_sort_order == "descending"

    @property
    def sorted_run_stop_trigger(self) -> int:
        if self.sorted_run_stop_trigger_option is not None:
            return self.sorted_run_stop_trigger_option
        return self.sorted_run_compaction_trigger + 3

    @property
    def lookup_compact_max_interval(self) -> int:
        """Never below the compaction trigger (as in Paimon)."""
        value = self.lookup_compact_max_interval_option or 2 * self.sorted_run_compaction_trigger
        return max(value, self.sorted_run_compaction_trigger)

    @property
    def full_compaction_every(self) -> int | None:
        """Data commits between full compactions: ``full-compaction.delta-commits``, or 1 when
        ``changelog-producer`` is full-compaction (Paimon's effective value), else None."""
        if self.full_compaction_delta_commits is not None:
            return self.full_compaction_delta_commits
        return 1 if self.changelog_producer == "full-compaction" else None

    @property
    def num_levels(self) -> int:
        if self.num_levels_option is not None:
            return self.num_levels_option
        return self.sorted_run_compaction_trigger + 1


def _validate_field_option(key: str, text: str, where: str) -> None:
    match = _FIELD_OPTION.match(key)
    if match is None:
        return
    parse = _FIELD_OPTION_PARSERS.get(match.group(2))
    if parse is None:
        return
    try:
        parse(text)
    except ValueError as exc:
        raise OptionError(f"bad value {text!r} for option {key!r}{where}: {exc}") from None


def check_option_keys(options: Mapping[str, Any], *, table: str = "") -> None:
    """Refuse option keys that are near misses of an option we honour (``buckets``, ``Bucket``,
    ``write_buffer_size``), given at create or alter.

    Keys we do not know are otherwise kept and written back (other engines' options such as
    ``sink.parallelism`` belong in the schema too), so a misspelt key would be stored and
    silently do nothing. A key is a near miss when, after lower-casing and turning ``_`` into
    ``-``, it is within one edit (two for keys of 10+ characters) of a declared key: no option
    key of Java Paimon (CoreOptions and the connector options) is that close to one of ours.
    Schema files read from storage are never checked this way.
    """
    known = {spec.key for spec in option_specs()}
    where = f" of table {table}" if table else ""
    for key in options:
        if not isinstance(key, str) or not key.strip():
            raise OptionError(f"option key {key!r}{where} must be a non-empty string")
        if key in known or key.startswith("fields."):
            continue
        normalized = key.strip().lower().replace("_", "-")
        near = sorted((distance, candidate) for candidate in known
                      if (distance := _edit_distance(normalized, candidate, 2 if len(candidate) >= 10 else 1))
                      <= (2 if len(candidate) >= 10 else 1))
        if near:
            raise OptionError(f"unknown option {key!r}{where}: did you mean {near[0][1]!r}?")


def _edit_distance(a: str, b: str, limit: int) -> int:
    """Optimal-string-alignment distance (a swap of neighbours counts once), or ``limit + 1``
    as soon as it is known to exceed ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    before: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            cost = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, before[j - 2] + 1)
            current.append(cost)
        if min(current) > limit:
            return limit + 1
        before, previous = previous, current
    return previous[-1]


def option_specs() -> list[OptionSpec]:
    """Every declared option, in declaration order (used to render the README table)."""
    specs = [f.metadata.get("spec") for f in dataclasses.fields(TableOptions)]
    return [spec for spec in specs if spec is not None]


def options_markdown() -> str:
    """A Markdown table of every supported option with its default and effect."""
    lines = ["| option | default | effect |", "|---|---|---|"]
    for spec in option_specs():
        default = f"`{spec.shown}`" if spec.shown else _render_default(spec.default)
        lines.append(f"| `{spec.key}` | {default} | {spec.doc} |")
    return "\n".join(lines)


def _render_default(value: Any) -> str:
    if value is None or value == ():
        return "(unset)"
    if isinstance(value, StatsMode):
        return f"`{value.kind}({value.length})`" if value.kind == "truncate" else f"`{value.kind}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"

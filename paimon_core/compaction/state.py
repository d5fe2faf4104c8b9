"""A table's LSM shape as reported to users, sensors and asset checks (metadata only)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BucketState:
    """One (partition, bucket): files per level and what compaction owes it."""

    partition: str
    bucket: int
    level0_files: int
    sorted_runs: int
    level_files: tuple[int, ...]  # level 0 first
    level_bytes: tuple[int, ...]
    rows: int
    small_files: int
    debt_bytes: int  # bytes the picker would rewrite now
    pending: str | None  # the picker strategy that would fire now, if any

    @property
    def files(self) -> int:
        return sum(self.level_files)

    @property
    def total_bytes(self) -> int:
        return sum(self.level_bytes)


@dataclass(frozen=True, slots=True)
class LsmState:
    """Every bucket of a table's latest snapshot."""

    table: str
    snapshot_id: int | None
    stop_trigger: int  # sorted runs at which compacting writers stall
    buckets: tuple[BucketState, ...]
    # Scheduled full compaction (``full-compaction.delta-commits``, or every commit with the
    # full-compaction changelog producer): its interval, and the data commits since the last
    # one (counted up to the interval); None when none is scheduled.
    full_compaction_every: int | None = None
    commits_since_full: int | None = None

    @property
    def full_compaction_due(self) -> bool:
        every, since = self.full_compaction_every, self.commits_since_full
        return every is not None and since is not None and since >= every

    @property
    def max_level0_files(self) -> int:
        return max((b.level0_files for b in self.buckets), default=0)

    @property
    def max_sorted_runs(self) -> int:
        return max((b.sorted_runs for b in self.buckets), default=0)

    @property
    def debt_bytes(self) -> int:
        return sum(b.debt_bytes for b in self.buckets)

    @property
    def small_file_ratio(self) -> float:
        files = sum(b.files for b in self.buckets)
        return sum(b.small_files for b in self.buckets) / files if files else 0.0

    def over(self, level0_threshold: int) -> list[BucketState]:
        """Buckets whose level-0 file count reached ``level0_threshold``."""
        return [b for b in self.buckets if b.level0_files >= level0_threshold]

    def rows(self) -> list[dict[str, object]]:
        """One plain dict per bucket (for tables in the CLI and Dagster metadata)."""
        return [{"partition": b.partition or "-", "bucket": b.bucket, "L0 files": b.level0_files,
                 "sorted runs": b.sorted_runs, "files per level": "/".join(map(str, b.level_files)),
                 "bytes": b.total_bytes, "rows": b.rows, "small files": b.small_files,
                 "debt bytes": b.debt_bytes, "pending": b.pending or "-"} for b in self.buckets]

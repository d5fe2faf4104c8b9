"""Compacting a table: plan the selected buckets of the latest snapshot, rewrite, commit COMPACT.

Buckets are compacted concurrently; all their increments land in one COMPACT snapshot. The
commit fails with :class:`CommitConflictError` (and removes what it wrote) if a concurrent
commit removed a file the compaction replaces; appends that only add files never conflict.
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from paimon_core.binary_row import deserialize_with_arity
from paimon_core.commit import FileStoreCommit
from paimon_core.compaction.append import writer_slices
from paimon_core.compaction.dv_index import with_deletion_vectors
from paimon_core.compaction.levels import level_sizes
from paimon_core.compaction.planning import BucketFiles, BucketWork, Planner
from paimon_core.compaction.rewriter import AppendRewriter, MergeTreeRewriter
from paimon_core.compaction.state import BucketState, LsmState
from paimon_core.errors import OptionError, UnsupportedFeatureError
from paimon_core.manifest import DataFileMeta, IndexManifestEntry, ManifestEntry
from paimon_core.progress import Progress, no_progress
from paimon_core.read.merge_read import key_bounds
from paimon_core.read.scan import DELETION_VECTORS, PartitionDecoder, deletion_files, live_entries, live_index_entries
from paimon_core.snapshot import BATCH_COMMIT_IDENTIFIER, Snapshot
from paimon_core.threads import worker_threads
from paimon_core.write.conform import internal_partition_spec
from paimon_core.write.data_file import local_now_millis
from paimon_core.write.message import CompactIncrement
from paimon_core.write.routing import make_partition
from paimon_core.write.shard import Shard

if TYPE_CHECKING:
    from paimon_core.table_context import TableContext

log = logging.getLogger(__name__)

_THREADS = worker_threads()
COMPACTION_PROPERTY = "paimon-dagster.compaction"  # "full" or "auto", stored in COMPACT snapshots

# ``{column: value}``, or a partition path as lsm_state reports it (``dt=2024-01-01``)
PartitionSpec = Mapping[str, Any] | str


@dataclass(frozen=True, slots=True)
class BucketCompaction:
    """What compacting one bucket did."""

    partition: str
    bucket: int
    reason: str
    output_level: int
    files_in: int
    files_out: int
    files_upgraded: int
    bytes_in: int
    bytes_out: int
    rows_in: int
    rows_out: int
    level_files_before: tuple[int, ...]
    level_files_after: tuple[int, ...]
    changelog_files: int = 0
    changelog_rows: int = 0


class BucketTotals:
    """Totals over ``buckets``, for every result that carries per-bucket compactions."""

    __slots__ = ()
    buckets: tuple[BucketCompaction, ...]

    @property
    def files_in(self) -> int:
        return sum(b.files_in for b in self.buckets)

    @property
    def files_out(self) -> int:
        return sum(b.files_out for b in self.buckets)

    @property
    def rows_in(self) -> int:
        return sum(b.rows_in for b in self.buckets)

    @property
    def rows_out(self) -> int:
        return sum(b.rows_out for b in self.buckets)

    @property
    def bytes_in(self) -> int:
        return sum(b.bytes_in for b in self.buckets)

    @property
    def bytes_out(self) -> int:
        return sum(b.bytes_out for b in self.buckets)

    @property
    def changelog_rows(self) -> int:
        """Rows of changelog the compaction produced (lookup / full-compaction producers)."""
        return sum(b.changelog_rows for b in self.buckets)


@dataclass(frozen=True, slots=True)
class CompactionResult(BucketTotals):
    """The outcome of :meth:`Table.compact`; ``snapshot_id`` is None when nothing needed compacting."""

    table: str
    snapshot_id: int | None
    full: bool
    buckets: tuple[BucketCompaction, ...]
    duration_s: float

    def summary(self) -> str:
        if self.snapshot_id is None:
            return f"{self.table}: nothing to compact ({self.duration_s:.2f}s)"
        changelog = f", {self.changelog_rows} changelog rows" if self.changelog_rows else ""
        return (f"{self.table}: snapshot {self.snapshot_id}, {len(self.buckets)} buckets, {self.files_in} files "
                f"({self.bytes_in} bytes) -> {self.files_out} files ({self.bytes_out} bytes){changelog} "
                f"in {self.duration_s:.2f}s")


@dataclass(frozen=True, slots=True)
class PreparedCompaction:
    """Compactions whose files are written but not committed."""

    full: bool
    work: tuple[BucketWork, ...]
    increments: tuple[CompactIncrement, ...]
    started: float


class TableCompactor:
    """Plans and runs compactions of one table (dedicated jobs and compacting writers use it)."""

    def __init__(self, table: TableContext, *, commit_user: str | None = None) -> None:
        self.table = table
        self.schema = table.schema
        self.options = table.options
        self.commit_user = commit_user or f"compact-{uuid.uuid4()}"
        key_types = [self.schema.field(k).type for k in self.schema.trimmed_primary_keys]
        self.planner = Planner(self.options, bool(self.schema.primary_keys),
                               key_of=lambda row: deserialize_with_arity(row, key_types),
                               bounds=key_bounds(key_types))

    # ---- reading the table's shape ---------------------------------------------------------

    def buckets(self, snapshot: Snapshot, partitions: PartitionSpec | Sequence[PartitionSpec] | None = None,
                buckets: Iterable[int] | None = None) -> list[BucketFiles]:
        """Live files of the selected buckets of ``snapshot``, by (partition, bucket)."""
        schema = self.table.schemas.schema(snapshot.schema_id) if snapshot.schema_id != self.schema.id \
            else self.schema
        decode = PartitionDecoder(schema.partition_types)
        specs, wanted_paths = self._partition_specs(partitions)
        wanted = set(buckets) if buckets is not None else None
        paths: dict[bytes, str] = {}

        def path_of(row: bytes) -> str:
            if row not in paths:
                paths[row] = make_partition(decode(row), schema.partition_keys, schema.partition_types,
                                            self.options).path
            return paths[row]

        def keep(entry: ManifestEntry) -> bool:
            if wanted is not None and entry.bucket not in wanted:
                return False
            if specs is None:
                return True
            values = dict(zip(schema.partition_keys, decode(entry.partition)))
            return (any(all(values[k] == v for k, v in spec.items()) for spec in specs)
                    or path_of(entry.partition) in wanted_paths)

        grouped: dict[tuple[bytes, int], list[ManifestEntry]] = {}
        for entry in live_entries(self.table.file_io, self.table.paths, snapshot, entry_filter=keep):
            grouped.setdefault((entry.partition, entry.bucket), []).append(entry)
        out = []
        for (row, bucket), entries in grouped.items():
            partition = make_partition(decode(row), schema.partition_keys, schema.partition_types, self.options)
            out.append(BucketFiles(partition, bucket, entries[0].total_buckets, tuple(e.file for e in entries)))
        return sorted(out, key=lambda b: (b.partition.path, b.bucket))

    def _require_existing(self, latest: Snapshot, selected: Sequence[BucketFiles],
                          partitions: PartitionSpec | Sequence[PartitionSpec] | None,
                          buckets: Iterable[int] | None) -> None:
        """Refuse a selection naming a partition or bucket without files: a typo would otherwise
        compact nothing and say so only in passing."""
        keys = self.schema.partition_keys
        in_partitions = selected if buckets is None else self.buckets(latest, partitions)
        given = [] if partitions is None else [partitions] if isinstance(partitions, Mapping | str) \
            else list(partitions)
        missing: list[object] = []
        for spec in given:
            if isinstance(spec, str):
                found = any(b.partition.path == spec for b in in_partitions)
            else:
                internal = internal_partition_spec(spec, self.schema, table=self.table.name)
                found = any(all(dict(zip(keys, b.partition.values))[k] == v for k, v in internal.items())
                            for b in in_partitions)
            if not found:
                missing.append(spec if isinstance(spec, str) else dict(spec))
        if missing:
            raise OptionError(f"compaction of table {self.table.name}: partitions {missing} hold no files in "
                              f"snapshot {latest.id}; nothing was compacted (see `paimon lsm {self.table.name}`)")
        absent = sorted(set(buckets) - {b.bucket for b in selected}) if buckets is not None else []
        if absent:
            present = sorted({b.bucket for b in in_partitions})
            raise OptionError(f"compaction of table {self.table.name}: buckets {absent} hold no files in the "
                              f"selected partitions of snapshot {latest.id} (buckets with files: {present}); "
                              "nothing was compacted")

    def _partition_specs(self, partitions: PartitionSpec | Sequence[PartitionSpec] | None
                         ) -> tuple[list[dict[str, Any]] | None, set[str]]:
        """Mappings as internal values, and partition paths (``dt=2024-01-01``) as given."""
        if partitions is None:
            return None, set()
        given = [partitions] if isinstance(partitions, Mapping | str) else list(partitions)
        specs = [internal_partition_spec(spec, self.schema, table=self.table.name)
                 for spec in given if not isinstance(spec, str)]
        return specs, {spec for spec in given if isinstance(spec, str)}

    def state(self, partitions: PartitionSpec | Sequence[PartitionSpec] | None = None,
              buckets: Iterable[int] | None = None) -> LsmState:
        """The LSM shape of the latest snapshot, per bucket, from manifests alone."""
        latest = self.table.latest_snapshot()
        if latest is None:
            return LsmState(self.table.name, None, self.options.sorted_run_stop_trigger, ())
        now = local_now_millis()
        small = self.options.compaction_file_size(primary_key=self.planner.primary_key)
        out = []
        for bucket in self.buckets(latest, partitions, buckets):
            levels = self.planner.levels(bucket.files)
            work = self.planner.plan(bucket, full=False, now_ms=now)
            out.append(BucketState(
                partition=bucket.partition.path, bucket=bucket.bucket, level0_files=len(levels.level0),
                sorted_runs=levels.number_of_sorted_runs,
                level_files=(len(levels.level0),) + tuple(len(level) for level in levels.levels),
                level_bytes=tuple(level_sizes(levels)), rows=sum(f.row_count for f in bucket.files),
                small_files=sum(1 for f in bucket.files if f.file_size < small),
                debt_bytes=work.rewrite_bytes if work is not None else 0,
                pending=work.reason if work is not None else None))
        every = self.options.full_compaction_every
        return LsmState(self.table.name, latest.id, self.options.sorted_run_stop_trigger, tuple(out),
                        full_compaction_every=every,
                        commits_since_full=self._commits_since_full(latest, every) if every else None)

    # ---- compacting -----------------------------------------------------------------------------

    def compact(self, partitions: PartitionSpec | Sequence[PartitionSpec] | None = None,
                buckets: Iterable[int] | None = None, *, full: bool = False,
                only: Collection[tuple[bytes, int]] | None = None,
                commit_identifier: int = BATCH_COMMIT_IDENTIFIER, progress: Progress = no_progress,
                require_existing: bool = False) -> CompactionResult:
        """Plan, rewrite and commit; ``only`` limits it to these (partition row, bucket) pairs.
        ``require_existing`` refuses partitions and buckets that hold no file (a typo)."""
        return self.commit(self.prepare(partitions, buckets, full=full, only=only, progress=progress,
                                        require_existing=require_existing), commit_identifier)

    def prepare(self, partitions: PartitionSpec | Sequence[PartitionSpec] | None = None,
                buckets: Iterable[int] | None = None, *, full: bool = False,
                only: Collection[tuple[bytes, int]] | None = None,
                shard: Shard | None = None, progress: Progress = no_progress,
                require_existing: bool = False) -> PreparedCompaction:
        """Plan the selected buckets of the latest snapshot and write their new files (uncommitted).

        ``shard`` keeps the buckets that compaction task owns (Paimon's channel of a bucket), so
        tasks of one compaction never rewrite the same bucket.
        """
        started = time.monotonic()
        latest = self.table.latest_snapshot()
        if latest is None:
            return PreparedCompaction(full, (), (), started)
        index = live_index_entries(self.table.file_io, self.table.paths, latest)
        self._refuse_append_deletion_vectors(index)
        full = full or self._full_due(latest)
        now = local_now_millis()
        selected = self.buckets(latest, partitions, buckets)
        if require_existing:
            self._require_existing(latest, selected, partitions, buckets)
        if only is not None:
            selected = [b for b in selected if (b.partition.row, b.bucket) in only]
        if shard is not None:
            selected = [b for b in selected if shard.owns(b.partition.row, b.bucket)]
        work = tuple(w for b in selected if (w := self.planner.plan(b, full=full, now_ms=now)) is not None)
        return PreparedCompaction(full, work, tuple(self._run(work, index, progress)), started)

    def commit(self, prepared: PreparedCompaction,
               commit_identifier: int = BATCH_COMMIT_IDENTIFIER) -> CompactionResult:
        """Commit prepared compactions as one COMPACT snapshot (removing their files on conflict)."""
        committer = FileStoreCommit(self.table.file_io, self.table.paths, self.schema, self.options,
                                    table=self.table.name, commit_user=self.commit_user)
        snapshot_id = committer.commit_compaction(
            prepared.increments, properties={COMPACTION_PROPERTY: "full" if prepared.full else "auto"},
            commit_identifier=commit_identifier)
        reports = self.reports(prepared)
        result = CompactionResult(self.table.name, snapshot_id, prepared.full,
                                  reports if snapshot_id is not None else (), time.monotonic() - prepared.started)
        for report in result.buckets:
            log.info("compacted %s partition %r bucket %d (%s): %d files, %d bytes -> %d files, %d bytes; "
                     "%d moved to level %d; files per level %s -> %s", self.table.name, report.partition,
                     report.bucket, report.reason, report.files_in, report.bytes_in, report.files_out,
                     report.bytes_out, report.files_upgraded, report.output_level,
                     report.level_files_before, report.level_files_after)
        log.info("compaction of %s", result.summary())
        return result

    def _run(self, work: Sequence[BucketWork], index: Sequence[IndexManifestEntry],
             progress: Progress = no_progress) -> list[CompactIncrement]:
        if not work:
            return []
        if not self.planner.primary_key:
            return self._run_append(work, progress)
        file_io, paths = self.table.file_io, self.table.paths
        options = self.options
        # Input chunks of the buckets compacted at once share write-buffer-size; merge copies and
        # the output row group come on top, so a task gets a third of its share for input.
        budget = options.write_buffer_size // (3 * min(_THREADS, len(work)))
        merge = MergeTreeRewriter(file_io, paths, self.table.schemas, self.schema, options, table=self.table.name,
                                  memory_budget=budget)
        vectors = deletion_files(paths, index)
        dv_entries = [e for e in index if e.index_type == DELETION_VECTORS]

        def run(w: BucketWork) -> CompactIncrement:
            assert w.task is not None
            where = (w.bucket.partition.row, w.bucket.bucket)
            current = vectors.get(where, {})
            increment, deleted = merge.run(w.bucket.partition, w.bucket.bucket, w.bucket.total_buckets, w.task,
                                           current)
            if not options.deletion_vectors_enabled and not current:
                return increment
            entries = [e for e in dv_entries if (e.partition, e.bucket) == where]
            return with_deletion_vectors(file_io, paths, increment, current, entries, deleted)

        return _in_parallel(self.table, [partial(run, w) for w in work], progress, "compacting buckets")

    def _run_append(self, work: Sequence[BucketWork], progress: Progress) -> list[CompactIncrement]:
        """Rewrite the groups of append buckets; a group worth several files takes several writers."""
        table = self.table
        rewriter = AppendRewriter(table.file_io, table.paths, table.schemas, self.schema, self.options,
                                  table=table.name)
        target = self.options.target_file_size_for(primary_key=False)
        tasks: list[Callable[[], CompactIncrement]] = []
        counts: list[int] = []  # tasks of each bucket, which come one after another
        for w in work:
            pieces = [piece for group in w.groups for piece in writer_slices(group, target, _THREADS)]
            counts.append(len(pieces))
            tasks += [partial(rewriter.rewrite, w.bucket.partition, w.bucket.bucket, w.bucket.total_buckets,
                              piece.files, piece.first_sequence) for piece in pieces]
        done = iter(_in_parallel(table, tasks, progress, "rewriting file groups"))
        increments = []
        for w, count in zip(work, counts):
            mine = list(itertools.islice(done, count))
            increments.append(CompactIncrement(w.bucket.partition, w.bucket.bucket, w.bucket.total_buckets,
                                               tuple(f for p in mine for f in p.before),
                                               tuple(f for p in mine for f in p.after)))
        return increments

    def reports(self, prepared: PreparedCompaction) -> tuple[BucketCompaction, ...]:
        """What each prepared bucket compaction does, as a commit of it will report."""
        return tuple(self._report(w, i) for w, i in zip(prepared.work, prepared.increments))

    def _report(self, work: BucketWork, increment: CompactIncrement) -> BucketCompaction:
        before_files = work.bucket.files
        gone = {(f.file_name, f.level) for f in increment.before}
        after_files = [f for f in before_files if (f.file_name, f.level) not in gone] + list(increment.after)
        written = increment.new_files
        moved = len(increment.after) - len(written)
        rewritten_in = [f for f in increment.before if f.file_name not in {a.file_name for a in increment.after}]
        return BucketCompaction(
            partition=work.bucket.partition.path, bucket=work.bucket.bucket, reason=work.reason,
            output_level=work.task.output_level if work.task is not None else 0,
            files_in=len(rewritten_in), files_out=len(written), files_upgraded=moved,
            bytes_in=sum(f.file_size for f in rewritten_in), bytes_out=sum(f.file_size for f in written),
            rows_in=sum(f.row_count for f in rewritten_in), rows_out=sum(f.row_count for f in written),
            level_files_before=self._level_counts(before_files), level_files_after=self._level_counts(after_files),
            changelog_files=len(increment.changelog_files),
            changelog_rows=sum(f.row_count for f in increment.changelog_files))

    def _level_counts(self, files: Sequence[DataFileMeta]) -> tuple[int, ...]:
        levels = self.planner.levels(files)
        return (len(levels.level0),) + tuple(len(level) for level in levels.levels)

    def _full_due(self, latest: Snapshot) -> bool:
        """A full compaction is scheduled and that many data commits landed since the last one."""
        every = self.options.full_compaction_every
        return every is not None and self._commits_since_full(latest, every) >= every

    def _commits_since_full(self, latest: Snapshot, limit: int) -> int:
        """Data (non-COMPACT) snapshots since the last full compaction, counted up to ``limit``."""
        commits = 0
        store = self.table.snapshots
        earliest = store.earliest_id() or 1
        for snapshot_id in range(latest.id, earliest - 1, -1):
            snapshot = latest if snapshot_id == latest.id else store.snapshot(snapshot_id)
            if snapshot.commit_kind == "COMPACT" and (snapshot.properties or {}).get(COMPACTION_PROPERTY) == "full":
                break
            if snapshot.commit_kind != "COMPACT":
                commits += 1
                if commits >= limit:
                    break
        return commits

    def _refuse_append_deletion_vectors(self, index: Sequence[IndexManifestEntry]) -> None:
        if not self.planner.primary_key and any(e.index_type == DELETION_VECTORS for e in index):
            raise UnsupportedFeatureError(f"append table {self.table.name} has deletion vectors; compacting it "
                                          "is not supported yet")


def _in_parallel(table: TableContext, tasks: Sequence[Callable[[], CompactIncrement]],
                 progress: Progress, label: str) -> list[CompactIncrement]:
    """Run rewrite tasks on the worker threads, their increments in task order. If one fails,
    what the others wrote is removed and its error raised (nothing is committed)."""
    with ThreadPoolExecutor(min(_THREADS, len(tasks)), thread_name_prefix="paimon-compact") as pool:
        futures = [pool.submit(task) for task in tasks]
        progress(label, 0, len(futures))
        for finished, _ in enumerate(as_completed(futures), 1):
            progress(label, finished, len(futures))
    done = [f.result() for f in futures if f.exception() is None]
    failures = [error for f in futures if (error := f.exception()) is not None]
    if failures:
        _discard(table, done)
        raise failures[0]
    return done


def _discard(table: TableContext, increments: Sequence[CompactIncrement]) -> None:
    """Delete the files finished tasks wrote (another task failed, nothing is committed)."""
    for increment in increments:
        directory = table.paths.bucket_dir(increment.partition.path, increment.bucket)
        for meta in increment.new_files:
            table.file_io.delete_quietly(f"{directory}/{meta.file_name}")
        for entry in increment.index_after:
            table.file_io.delete_quietly(table.paths.index_file(entry.file_name))

"""What a primary-key compaction does with the files it picked (Paimon's MergeTreeCompactTask).

Pure: decides from metadata which files are rewritten together and which only change level.
The picked files are cut into key-range sections. A section of several files is rewritten
(merged). A section of one file is small or big: small files join the pending rewrite; a big
file closes the pending rewrite and is upgraded (its level changes, its bytes do not). Upgrading
into the max level, where deletes are dropped, rewrites the file if it may hold deletes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from paimon_core.compaction.intervals import Bounds, sections
from paimon_core.compaction.levels import Levels
from paimon_core.compaction.picker import CompactionPlan
from paimon_core.manifest import DataFileMeta


@dataclass(frozen=True, slots=True)
class Rewrite:
    """Merge these files (one or more sections, adjacent in key order) into one sorted run."""

    files: tuple[DataFileMeta, ...]

    @property
    def size(self) -> int:
        return sum(f.file_size for f in self.files)


@dataclass(frozen=True, slots=True)
class Upgrade:
    """Move a file to the output level; ``check_deletes``: rewrite it instead if it holds deletes."""

    file: DataFileMeta
    check_deletes: bool


Action = Rewrite | Upgrade
LookupMode = Literal["drop-new", "delete-old"]
ChangelogMode = Literal["full", "lookup"]


@dataclass(frozen=True, slots=True)
class TaskPlan:
    """The actions of one bucket's compaction and where their output goes."""

    plan: CompactionPlan
    output_level: int
    drop_delete: bool
    actions: tuple[Action, ...]
    # Lookup tables: files below the output whose keys the output must not repeat, because
    # readers of levels >= 1 rely on every key being live in one file only. first-row drops
    # such keys from the output (the older row wins); deletion vectors mark the older row deleted.
    lookup_files: tuple[DataFileMeta, ...] = ()
    lookup_mode: LookupMode | None = None
    # The changelog this task produces: "full" (full-compaction producer, output at the max
    # level) or "lookup" (lookup producer, level-0 files in the input); None for none.
    changelog: ChangelogMode | None = None

    @property
    def rewrite_bytes(self) -> int:
        """Bytes this task rewrites (the bucket's compaction debt), upgrades with deletes included."""
        return sum(a.size for a in self.actions if isinstance(a, Rewrite)) + sum(
            a.file.file_size for a in self.actions
            if isinstance(a, Upgrade) and a.check_deletes and _may_hold_deletes(a.file))


def _may_hold_deletes(meta: DataFileMeta) -> bool:
    return meta.delete_row_count is None or meta.delete_row_count > 0


def drop_delete(levels: Levels, output_level: int, *, deletion_vectors: bool) -> bool:
    """Deletes can be dropped when nothing older lies below the output (Paimon's rule)."""
    return output_level != 0 and (output_level >= levels.highest_non_empty_level or deletion_vectors)


def changelog_mode(producer: str, plan: CompactionPlan, max_level: int) -> ChangelogMode | None:
    """Which changelog a compaction writes (Paimon's rewriters for each producer)."""
    if producer == "full-compaction" and plan.output_level == max_level:
        return "full"
    if producer == "lookup" and any(f.level == 0 for f in plan.files):
        return "lookup"
    return None


def plan_task(plan: CompactionPlan, levels: Levels, bounds: Bounds, *, min_file_size: int,
              force_rewrite: bool = False, deletion_vectors: bool = False, first_row: bool = False,
              changelog_producer: str = "none") -> TaskPlan:
    """Rewrites and upgrades for ``plan``; files under ``min_file_size`` are never just moved.

    ``first_row``, ``deletion_vectors`` and the lookup changelog producer make it a lookup
    compaction (Paimon's): level-0 files are always rewritten, and their keys are looked up in
    the deeper levels. Files moved into the max level by a full-compaction changelog task
    are inserts to the changelog.
    """
    output = plan.output_level
    max_level = levels.max_level
    changelog = changelog_mode(changelog_producer, plan, max_level)
    picked = {f.file_name for f in plan.files}
    mode: LookupMode | None = "drop-new" if first_row else ("delete-old" if deletion_vectors else None)
    looks_up = mode is not None or changelog == "lookup"
    lookup = tuple(f for level, files in enumerate(levels.levels, start=1) if level > output
                   for f in files if f.file_name not in picked) if looks_up else ()
    actions: list[Action] = []
    pending: list[list[DataFileMeta]] = []

    def upgrade(meta: DataFileMeta) -> None:
        into_max = output == max_level
        if force_rewrite or (looks_up and meta.level == 0):
            actions.append(Rewrite((meta,)))
        elif meta.level != output:
            actions.append(Upgrade(meta, check_deletes=into_max))
        elif into_max and _may_hold_deletes(meta):
            actions.append(Rewrite((meta,)))

    def flush() -> None:
        if not pending:
            return
        if len(pending) == 1 and len(pending[0]) == 1:
            upgrade(pending[0][0])  # a lone small file: nothing to merge it with
        else:
            actions.append(Rewrite(tuple(f for section in pending for f in section)))
        pending.clear()

    for section in sections(plan.files, bounds):
        if len(section) > 1 or section[0].file_size < min_file_size:
            pending.append(section)
        else:
            flush()
            upgrade(section[0])
    flush()
    return TaskPlan(plan, output, drop_delete(levels, output, deletion_vectors=deletion_vectors), tuple(actions),
                    lookup, mode if lookup else None, changelog)

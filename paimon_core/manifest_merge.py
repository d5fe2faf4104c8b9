"""Manifest merging at commit (Paimon's ``ManifestFileMerger``): keeps the base manifest list short.

Every commit adds at least one manifest; without merging, planning a scan reads ever more small
files. What to merge is a pure decision on sizes (:func:`plan_merge`):

* **full**: when the manifests that must change (small ones, or ones holding DELETE entries) add
  up to ``manifest.full-compaction-threshold-size``, every manifest is rewritten with only the
  live files (ADD/DELETE pairs cancel out);
* otherwise **minor**: consecutive manifests are gathered until they reach
  ``manifest.target-file-size`` and each such group is rewritten as one; the trailing group is
  rewritten only when it has ``manifest.merge-min-count`` manifests.

Merged manifests replace the old ones in the new snapshot's base list; the old files stay for
older snapshots until expiry removes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from paimon_core.manifest import ADD, ManifestEntry, ManifestFileMeta


@dataclass(frozen=True, slots=True)
class MergePlan:
    """``groups``: runs of consecutive manifests, each rewritten as one (a run of one is kept)."""

    full: bool
    groups: tuple[tuple[int, ...], ...]

    @property
    def changes(self) -> bool:
        return self.full or any(len(group) > 1 for group in self.groups)


def _must_change(meta: ManifestFileMeta, target: int) -> bool:
    return meta.num_deleted_files > 0 or meta.file_size < target


def plan_merge(metas: Sequence[ManifestFileMeta], *, target_size: int, min_count: int,
               full_threshold: int) -> MergePlan:
    """How to merge ``metas`` (the previous snapshot's base and delta manifests, in order)."""
    pending = sum(m.file_size for m in metas if _must_change(m, target_size))
    if pending >= full_threshold:
        return MergePlan(True, (tuple(range(len(metas))),))
    groups: list[tuple[int, ...]] = []
    current: list[int] = []
    size = 0
    for index, meta in enumerate(metas):
        current.append(index)
        size += meta.file_size
        if size >= target_size:
            groups.append(tuple(current))
            current, size = [], 0
    if current:
        if len(current) >= min_count:
            groups.append(tuple(current))
        else:
            groups += [(i,) for i in current]
    return MergePlan(False, tuple(groups))


def merge_group(entry_lists: Sequence[Sequence[ManifestEntry]], *, full: bool) -> list[ManifestEntry]:
    """Entries of consecutive manifests with ADD/DELETE pairs of one file cancelled, in order.

    A DELETE whose ADD lies in an earlier manifest is kept (unless ``full``: then every manifest
    is in the group and an unmatched DELETE deletes nothing live).
    """
    merged: dict[object, ManifestEntry] = {}
    for entries in entry_lists:
        for entry in entries:
            key = entry.identifier
            if entry.kind == ADD:
                merged[key] = entry
            elif key in merged and merged[key].kind == ADD:
                del merged[key]
            elif not full:
                merged[key] = entry
    return list(merged.values())

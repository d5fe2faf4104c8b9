"""What a snapshot (or tag) references: its manifest lists, manifests, data and changelog
files, index manifest and index files, statistics. Snapshots share most manifests, so each
manifest and list is read once per collector."""

from __future__ import annotations

from paimon_core.fileio import FileIO
from paimon_core.layout import TablePaths
from paimon_core.manifest import ADD, ManifestFileMeta, read_index_manifest, read_manifest, read_manifest_list
from paimon_core.snapshot import Snapshot

# What a referencing object reaches: a snapshot everything; a tag its data (Java's tags never
# keep a changelog: expiry deletes a tagged snapshot's changelog files like any other); a
# long-lived changelog only its changelog (its other lists went with its snapshot).
SNAPSHOT, TAG, CHANGELOG = "snapshot", "tag", "changelog"


def manifest_lists(snapshot: Snapshot, reach: str = SNAPSHOT) -> list[str]:
    """The names of the manifest lists (base, delta, changelog) ``reach`` covers."""
    if reach == CHANGELOG:
        names = [snapshot.changelog_manifest_list]
    elif reach == TAG:
        names = [snapshot.base_manifest_list, snapshot.delta_manifest_list]
    else:
        names = [snapshot.base_manifest_list, snapshot.delta_manifest_list, snapshot.changelog_manifest_list]
    return [name for name in names if name is not None]


class References:
    """Collects file names referenced by snapshots, reading each metadata file once."""

    def __init__(self, file_io: FileIO, paths: TablePaths) -> None:
        self.file_io = file_io
        self.paths = paths
        self._lists: dict[str, list[ManifestFileMeta]] = {}
        self._manifests: dict[str, set[str]] = {}
        self._indexes: dict[str, list[tuple[str, int]]] = {}

    def manifests(self, list_name: str) -> list[ManifestFileMeta]:
        if list_name not in self._lists:
            self._lists[list_name] = read_manifest_list(self.file_io, self.paths.manifest_file(list_name))
        return self._lists[list_name]

    def index_files(self, snapshot: Snapshot) -> list[tuple[str, int]]:
        """Names and sizes of the index files ``snapshot``'s index manifest lists (snapshots share it)."""
        name = snapshot.index_manifest
        if name is None:
            return []
        if name not in self._indexes:
            entries = read_index_manifest(self.file_io, self.paths.manifest_file(name))
            self._indexes[name] = [(e.file_name, e.file_size) for e in entries if e.kind == ADD]
        return self._indexes[name]

    def _files_of(self, manifest: str) -> set[str]:
        if manifest not in self._manifests:
            names: set[str] = set()
            for entry in read_manifest(self.file_io, self.paths.manifest_file(manifest)):
                names.add(entry.file.file_name)
                names.update(entry.file.extra_files)
            self._manifests[manifest] = names
        return self._manifests[manifest]

    def names(self, snapshot: Snapshot, reach: str = SNAPSHOT) -> set[str]:
        """Every file name ``snapshot`` references as a ``reach`` (snapshot, tag or long-lived
        changelog), metadata and data alike."""
        lists = manifest_lists(snapshot, reach)
        used = set(lists)
        for list_name in lists:
            for meta in self.manifests(list_name):
                used.add(meta.file_name)
                used |= self._files_of(meta.file_name)
        if snapshot.index_manifest is not None and reach != CHANGELOG:
            used.add(snapshot.index_manifest)
            used.update(name for name, _ in self.index_files(snapshot))
        if snapshot.statistics is not None and reach != CHANGELOG:
            used.add(snapshot.statistics)
        return used

"""Crash and fault trials: one table operation in a child process with a fault injected, then
an independent check of the table from a clean client.

The child is forked from a forkserver that already imported pyarrow and paimon_core, so a trial
costs tens of milliseconds instead of an interpreter start. Each trial:

1. the parent knows the reference contents (``Model``) of both tables;
2. the child runs one operation (write / compact / expire / orphan cleanup) through a
   :class:`FaultyFileIO` and reports its outcome, unless it is SIGKILLed first;
3. the parent checks: the latest snapshot reads equal to the reference before or after (never
   anything else); a failure the child was told about left nothing visible; every retained
   snapshot reads; ids are contiguous; re-running the same write (same commit user and
   identifier, as a retried job does) makes it visible exactly once; orphan cleanup leaves no
   file that no snapshot references and changes no contents.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import multiprocessing as mp
import os
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa

from paimon_core.errors import CommitStateUnknownError, PaimonError
from paimon_core.fileio import FileIO
from paimon_core.manifest import read_index_manifest, read_manifest, read_manifest_list
from paimon_core.names import Identifier
from paimon_core.table import Table
from tests.support.faults.faulty_io import ACTIONS, Fault, FaultyFileIO
from tests.support.s3.store import Store

SCHEMA = pa.schema([("id", pa.int64()), ("qty", pa.int64()), ("dt", pa.string())])
DAYS = ("2024-01-01", "2024-01-02")
PK, LOGS = "db.pk", "db.logs"
FUTURE_MS = int((dt.datetime.now(dt.UTC) + dt.timedelta(days=30)).timestamp() * 1000)
PK_OPTIONS = {"bucket": "2", "num-sorted-run.compaction-trigger": "4", "snapshot.num-retained.min": "1",
              "snapshot.num-retained.max": "4", "changelog-producer": "input"}
LOG_OPTIONS = {"bucket": "-1", "compaction.min.file-num": "3", "snapshot.num-retained.min": "1",
               "snapshot.num-retained.max": "4"}

# Named crash points of a commit (after data files, manifests, ...), as (operation, fault).
MANIFEST = r"/manifest/manifest-[0-9a-f]{8}-"
NAMED_POINTS: dict[str, tuple[str, Fault]] = {
    "after data files written": ("write", Fault("write", MANIFEST, 1, "kill_before")),
    "after manifests": ("write", Fault("write", r"/manifest/manifest-list-", 1, "kill_before")),
    "before snapshot create": ("write", Fault("create", r"/snapshot/snapshot-\d+$", 1, "kill_before")),
    "after snapshot create": ("write", Fault("create", r"/snapshot/snapshot-\d+$", 1, "kill_after")),
    "mid-compaction": ("compact", Fault("output", r"/bucket-", 1, "kill_after")),  # one file written
    "mid-expiry": ("expire", Fault("delete", r".", 2, "kill_before")),
    "mid-orphan-GC": ("orphans", Fault("delete", r".", 2, "kill_before")),
}
OPERATIONS = ("write", "compact", "expire", "orphans")
# The storage calls each operation makes (a fault elsewhere would never strike).
OPS_OF = {"write": ("read", "stat", "list", "write", "output", "create"),
          "compact": ("read", "stat", "list", "write", "output", "create"),
          "expire": ("read", "stat", "list", "delete"),
          "orphans": ("read", "stat", "list", "delete")}


@dataclass
class Model:
    """Reference contents: PK table key -> qty; append table row -> count."""

    pk: dict[tuple[str, int], int] = field(default_factory=dict)
    logs: Counter[tuple[int, int, str]] = field(default_factory=Counter)

    def copy(self) -> Model:
        return Model(dict(self.pk), Counter(self.logs))


@dataclass(frozen=True)
class Change:
    """One write: PK upserts and deletes and append rows, committed to both tables."""

    upserts: list[tuple[str, int, int]]
    deletes: list[tuple[str, int]]
    rows: list[tuple[int, int, str]]
    user: str
    identifier: int

    def apply(self, model: Model, table: str) -> Model:
        out = model.copy()
        if table == PK:
            for day, key, qty in self.upserts:
                out.pk[(day, key)] = qty
            for day, key in self.deletes:
                out.pk.pop((day, key), None)
        else:
            out.logs.update(self.rows)
        return out


@dataclass(frozen=True)
class TrialSpec:
    warehouse: str
    storage_options: dict[str, Any] | None
    table: str
    operation: str
    faults: tuple[Fault, ...]
    change: Change | None
    result_path: str


def random_change(rng: random.Random, serial: int) -> Change:
    keys = rng.sample(range(300), 40)
    upserts = [(rng.choice(DAYS), k, rng.randrange(1_000_000)) for k in keys[:30]]
    deletes = [(rng.choice(DAYS), k) for k in keys[30:]]
    rows = [(serial * 1000 + i, serial, rng.choice(DAYS)) for i in range(rng.randrange(5, 40))]
    return Change(upserts, deletes, rows, user=f"trial-writer-{serial % 3}", identifier=serial)


# ---- the child ---------------------------------------------------------------------------------


def open_table(file_io: FileIO, root: str, name: str) -> Table:
    ident = Identifier.parse(name)
    return Table(file_io, ident, f"{root}/{ident.database}.db/{ident.table}")


def storage(warehouse: str, storage_options: dict[str, Any] | None) -> tuple[fsspec.AbstractFileSystem, str]:
    """The raw filesystem and root path of a warehouse (what FileIO.for_uri resolves)."""
    file_io, root = FileIO.for_uri(warehouse, storage_options)
    return file_io.fs, root


def run_operation(table: Table, operation: str, change: Change | None, *, compacts: bool = True) -> int | None:
    """The operation under test; the same code re-runs a write from a clean client. ``compacts``
    False leaves level 0 to a compaction trial (as a write-only writer would)."""
    if operation == "write":
        assert change is not None
        with table.new_write(commit_user=change.user, commit_identifier=change.identifier) as writer:
            writer.compacts = writer.compacts and compacts
            if table.name == PK:
                writer.write(pa.table({"id": [k for _, k, _ in change.upserts],
                                       "qty": [q for _, _, q in change.upserts],
                                       "dt": [d for d, _, _ in change.upserts]}, schema=SCHEMA))
                if change.deletes:
                    writer.delete(pa.table({"id": [k for _, k in change.deletes],
                                            "dt": [d for d, _ in change.deletes]}))
            else:
                writer.write(pa.table({"id": [r[0] for r in change.rows], "qty": [r[1] for r in change.rows],
                                       "dt": [r[2] for r in change.rows]}, schema=SCHEMA))
            return writer.commit()
    if operation == "compact":
        return table.compact(full=True).snapshot_id
    if operation == "expire":
        table.expire_snapshots(dry_run=False, older_than=FUTURE_MS, retain_min=1, retain_max=2)
        return None
    if operation == "orphans":
        table.remove_orphan_files(older_than=FUTURE_MS, dry_run=False, force=True)
        return None
    raise ValueError(operation)


def child(spec: TrialSpec) -> None:
    """Run in the forked child: the operation through faulty storage; the outcome to a file."""
    fs, root = storage(spec.warehouse, spec.storage_options)
    file_io = FaultyFileIO(fs, spec.faults)
    table = open_table(file_io, root, spec.table)
    outcome: dict[str, Any]
    try:
        outcome = {"outcome": "ok", "snapshot": run_operation(table, spec.operation, spec.change)}
    except CommitStateUnknownError as exc:
        outcome = {"outcome": "unknown", "error": str(exc)}
    except Exception as exc:  # every failure is reported, typed or not
        outcome = {"outcome": "failed", "error": f"{type(exc).__name__}: {exc}",
                   "typed": isinstance(exc, PaimonError | OSError)}
    outcome["fired"] = [dataclasses.astuple(f) + (p,) for f, p in file_io.fired]
    outcome["calls"] = dict(file_io.calls)
    Path(spec.result_path).write_text(json.dumps(outcome))


# ---- the parent --------------------------------------------------------------------------------


def fork_context() -> mp.context.BaseContext:
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["pyarrow", "pyarrow.parquet", "paimon_core", "tests.support.faults.trials"])
    return ctx


@dataclass
class Tally:
    """What the trials did, for the closing figures."""

    by_point: Counter[str] = field(default_factory=Counter)
    by_outcome: Counter[str] = field(default_factory=Counter)
    orphans_reclaimed: int = 0

    @property
    def fired(self) -> int:
        return sum(n for label, n in self.by_point.items() if label != "not reached")

    def as_dict(self) -> dict[str, Any]:
        return {"trials_by_fault": dict(self.by_point), "outcomes": dict(self.by_outcome),
                "orphans_reclaimed": self.orphans_reclaimed}


class Trials:
    """A warehouse with the two tables and their reference model, and the trial loop."""

    def __init__(self, root: Path, seed: int, store: Store) -> None:
        self.root = root
        self.store = store
        self.warehouse = store.warehouse
        self.rng = random.Random(seed)
        self.fewest_calls: dict[tuple[str, str], int] = {}  # (operation, call kind) -> calls it makes
        self.ctx = fork_context()
        self.model = Model()
        self.serial = 0
        self.tally = Tally()
        catalog = store.catalog()
        catalog.create_database("db")
        catalog.create_table(PK, schema=SCHEMA, primary_keys=["dt", "id"], partition_keys=["dt"], options=PK_OPTIONS)
        catalog.create_table(LOGS, schema=SCHEMA, partition_keys=["dt"], options=LOG_OPTIONS)
        self.clean, self.table_root = FileIO.for_uri(store.warehouse, store.storage_options)
        for name in (PK, LOGS):
            self._clean_writes(name, 3)

    def _clean_writes(self, name: str, count: int, *, compacts: bool = True) -> None:
        for _ in range(count):
            change = self._next_change()
            run_operation(self.table(name), "write", change, compacts=compacts)
            self.model = change.apply(self.model, name)

    def table(self, name: str) -> Table:
        return open_table(self.clean, self.table_root, name)

    def _next_change(self) -> Change:
        self.serial += 1
        return random_change(self.rng, self.serial)

    def random_fault(self) -> tuple[str, str, tuple[Fault, ...]]:
        """A fault on one of the first calls of a kind an operation makes: up to 6 (2 for creates
        and deletes), and no later than the fewest such calls a finished trial of it made."""
        operation = self.rng.choice(OPERATIONS)
        op = self.rng.choice(OPS_OF[operation])
        action = self.rng.choice(ACTIONS if op in ("write", "output", "create") else ACTIONS[:-1])
        highest = min(2 if op in ("create", "delete") else 6, self.fewest_calls.get((operation, op), 6))
        fault = Fault(op, r".", self.rng.randint(1, max(highest, 1)), action)
        return f"random {op} {action}", operation, (fault,)

    def run(self, label: str, operation: str, faults: tuple[Fault, ...], name: str | None = None) -> dict[str, Any]:
        name = name or self.rng.choice((PK, LOGS))
        change = self._next_change() if operation == "write" else None
        if operation == "orphans":
            self._plant_leftovers(name)
        if operation == "compact":
            self._clean_writes(name, 2, compacts=False)  # level-0 files for the compaction to rewrite
        result_path = str(self.root / f"result-{self.serial}-{time.monotonic_ns()}.json")
        spec = TrialSpec(self.warehouse, self.store.storage_options, name, operation, faults, change, result_path)
        proc = self.ctx.Process(target=child, args=(spec,))
        proc.start()
        proc.join(timeout=120)
        if proc.is_alive():
            proc.kill()
            raise AssertionError(f"trial {label} on {name} hung")
        if proc.exitcode == -9:
            outcome: dict[str, Any] = {"outcome": "killed"}
        else:
            outcome = json.loads(Path(result_path).read_text())
            os.unlink(result_path)
        outcome.update(label=label, table=name, operation=operation)
        if outcome["outcome"] == "ok":  # ran to its end: it makes at least this many calls of each kind
            for op, count in outcome.get("calls", {}).items():
                known = self.fewest_calls.get((operation, op))
                self.fewest_calls[(operation, op)] = count if known is None else min(known, count)
        reached = outcome["outcome"] == "killed" or bool(outcome["fired"])
        self.tally.by_point[label if reached else "not reached"] += 1
        self.tally.by_outcome[outcome["outcome"] if reached else "not reached"] += 1
        self.check(name, operation, change, outcome)
        return outcome

    def _plant_leftovers(self, name: str) -> None:
        """Files a crashed writer could have left: a data file, a manifest, a temp snapshot."""
        table = self.table(name)
        for relative in (f"dt={DAYS[0]}/bucket-0/data-leftover-{self.serial}.parquet",
                         f"manifest/manifest-leftover-{self.serial}", f"snapshot/.snapshot-9999.{self.serial}.tmp"):
            self.clean.write_bytes(f"{table.path}/{relative}", b"leftover")

    # ---- checks ----------------------------------------------------------------------------------

    def contents(self, table: Table, snapshot_id: int | None = None) -> Any:
        data = table.read(snapshot_id=snapshot_id)
        if table.name == PK:
            return {(d, k): q for k, q, d in zip(*data.to_pydict().values(), strict=True)}
        return Counter(zip(*data.to_pydict().values(), strict=True))

    def expected(self, name: str, model: Model) -> Any:
        return model.pk if name == PK else model.logs

    def check(self, name: str, operation: str, change: Change | None, outcome: dict[str, Any]) -> None:
        table = self.table(name)
        context = f"trial {outcome} on {name}"
        before = self.expected(name, self.model)
        after_model = change.apply(self.model, name) if change is not None else self.model
        after = self.expected(name, after_model)
        found = self.contents(table)
        assert found in (before, after), f"{context}: contents are neither before nor after the operation"
        if outcome["outcome"] == "ok":
            assert found == after, f"{context}: told ok, but the change is not (exactly) visible"
        if outcome["outcome"] == "failed" and operation == "write":
            assert outcome["typed"], f"{context}: untyped error"
            assert found == before, f"{context}: told failed, but the change is visible"
        self._check_snapshots(table, context)
        if change is not None:
            run_operation(table, "write", change)  # the retried job: lands once, or finds it landed
            assert self.contents(table) == after, f"{context}: re-running the same commit did not end exactly once"
            self.model = after_model
        self._check_orphans_cleaned(table, context)

    def _check_snapshots(self, table: Table, context: str) -> None:
        ids = [s.id for s in table.snapshots()]
        assert ids == list(range(ids[0], ids[0] + len(ids))), f"{context}: snapshot ids {ids} not contiguous"
        for snapshot_id in ids:
            table.read(snapshot_id=snapshot_id)  # raises if any file of a retained snapshot is gone

    def _check_orphans_cleaned(self, table: Table, context: str) -> None:
        expected = self.contents(table)
        swept = table.remove_orphan_files(older_than=FUTURE_MS, dry_run=False, force=True)
        self.tally.orphans_reclaimed += len(swept.orphans)
        assert self.contents(table) == expected, f"{context}: orphan cleanup changed the contents"
        used = referenced(table)
        every = list(self.store.files(f"{table.identifier.database}.db/{table.identifier.table}"))
        left = [p for p in every if not _is_metadata_hint(p)]
        stray = [p for p in left if p.rsplit("/", 1)[-1] not in used]
        assert not stray, f"{context}: unreferenced files left after orphan cleanup: {stray[:3]}"
        temp = [p for p in every if p.endswith(".tmp")]
        assert not temp, f"{context}: temp files left after orphan cleanup: {temp[:3]}"


def referenced(table: Table) -> set[str]:
    """Names of every file a retained snapshot or tag references, decoded independently of the
    cleanup under test (manifest lists -> manifests -> data files; index manifest -> index files)."""
    roots = table.snapshots() + [table.tag(tag.name) for tag in table.list_tags()]
    used: set[str] = set()
    for snapshot in roots:
        lists = [n for n in (snapshot.base_manifest_list, snapshot.delta_manifest_list,
                             snapshot.changelog_manifest_list) if n]
        used.update(lists)
        for list_name in lists:
            for meta in read_manifest_list(table.file_io, table.paths.manifest_file(list_name)):
                used.add(meta.file_name)
                for entry in read_manifest(table.file_io, table.paths.manifest_file(meta.file_name)):
                    used.add(entry.file.file_name)
                    used.update(entry.file.extra_files)
        if snapshot.index_manifest:
            used.add(snapshot.index_manifest)
            used.update(e.file_name for e in read_index_manifest(
                table.file_io, table.paths.manifest_file(snapshot.index_manifest)))
    return used


def _is_metadata_hint(path: str) -> bool:
    """Snapshot, schema, tag and consumer files and hints, and the commit ledger's records
    (not what orphan cleanup judges)."""
    return (bool(re.search(r"/(snapshot|changelog|tag|schema|consumer)/[^/]+$|/commit-ledger/[^/]+/commit-\d+$", path))
            and not path.endswith(".tmp")) or path.endswith("/")

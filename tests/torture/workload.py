"""The torture workload: writer, compaction and expiry processes racing on two tables.

Shape: ``writers`` writer processes, ``compactors`` compaction processes and
one expiry process, all started with the multiprocessing *spawn* context (s3fs keeps an
event-loop thread that must not be forked) and released together by a barrier.

* **Tables.** ``torture.events``, an append table (unaware buckets, partitioned by ``part``),
  and ``torture.state``, a primary-key table (``part``, ``k``), partitioned, with fixed buckets.
  Both are ``write-only``: writers never compact or expire themselves.
* **Writers.** Writer ``w`` commits as user ``writer-w`` with identifier ``seq`` = 1, 2, ...;
  each round commits once to *each* table (the table it starts with alternates). Every payload
  is a pure function of ``(w, seq)`` (:func:`append_rows`, :func:`pk_change`), so the checker
  rebuilds it. Append rows carry ``(writer, seq, row_no)``. PK commits upsert and delete keys
  the writer owns (disjoint ranges, so their final state is deterministic) and upsert a few
  keys of a small set shared by every writer, whose expected final value is that of the
  successful commit with the highest snapshot id (commit order = merge order).
  Writers 2 and 6 write their PK commits as two slice writers (``input_slice``), the way a
  fanned-out Dagster write does: slice 0 upserts every key of the commit with a superseded
  version (``seq`` negated, so it is the rows of no commit if it ever shows) and slice 1 writes
  the commit's real upserts and deletes over it, so a slice merged out of order is caught.
  Writers 3 and 7 pause up to ``slow_publish_s`` before publishing each snapshot (a slow
  client), so their attempts race on a stale base while expiry deletes. Odd writers run with
  ``commit.max-retries`` = ``impatient_retries`` so that some commits do end in
  :class:`CommitConflictError` (and must then be invisible). A commit is retried as a user
  would: the same user and identifier after :class:`CommitStateUnknownError` (or another
  storage error), never after :class:`CommitConflictError`, which is a final outcome.
* **Compactors** loop ``compact()`` (every third time ``full=True``) as users ``compactor-i``,
  mostly on one table each and every fourth time on the other one, where they race each other;
  a :class:`CommitConflictError` is an expected outcome and only counted.
* **Expiry** loops ``expire_snapshots(dry_run=False, older_than=now)`` with small
  ``retain_min``/``retain_max`` so it deletes while writers run, and now and then
  ``remove_orphan_files`` with the *default* (safe, one day) window. A forced orphan cleanup
  runs only after every process stopped (in :mod:`tests.torture.checks`).

Every process sends one report through a queue; :func:`run_torture` collects them into a
:class:`RaceResult` for :func:`tests.torture.checks.verify`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import multiprocessing as mp
import queue as queue_module
import random
import time
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

import paimon_core as pc
from paimon_core.errors import CommitConflictError, CommitStateUnknownError
from paimon_core.fileio import FileIO

APPEND = "torture.events"
PK = "torture.state"
TABLES = {"append": APPEND, "pk": PK}
PARTS = ("a", "b")

APPEND_SCHEMA = pa.schema([("part", pa.string()), ("writer", pa.int32()), ("seq", pa.int32()),
                           ("row_no", pa.int32()), ("note", pa.string())])
PK_SCHEMA = pa.schema([pa.field("part", pa.string(), False), pa.field("k", pa.int64(), False),
                       ("writer", pa.int32()), ("seq", pa.int32()), ("v", pa.int64())])

OWNED_KEYS = 40  # keys each writer owns (k = writer * 10_000 + i)
UPSERTS = 8  # owned keys each PK commit upserts ...
DELETES = 3  # ... and deletes (the next keys on the writer's ring, disjoint from the upserts)
SHARED_KEYS = 4  # keys every writer upserts (k = SHARED_BASE + i)
SHARED_BASE = 1_000_000


@dataclass(frozen=True)
class TortureConfig:
    """Size and pacing of one race."""

    writers: int = 8
    rounds: int = 15  # per writer; each round is one commit to each of the two tables
    compactors: int = 2
    jitter_s: float = 0.0  # writers sleep uniform(0, jitter_s) between commits
    retain_min: int = 4
    retain_max: int = 8
    expiry_pause_s: float = 0.1
    orphan_every: int = 5  # the expiry process runs a safe-window orphan cleanup every Nth loop
    compaction_pause_s: float = 0.05
    buckets: int = 2
    commit_max_retries: int = 10  # the tables' commit.max-retries (compactors, even writers)
    impatient_retries: int = 2  # odd writers' own commit.max-retries: they do lose races for good
    commit_min_retry_wait: str = "5 ms"
    commit_max_retry_wait: str = "1 s"
    # Writers with w % 4 == 3 pause up to this long between preparing a snapshot and publishing
    # it (a slow network, a GC pause): their attempts race on a stale base while others commit
    # and expiry deletes. 0 disables.
    slow_publish_s: float = 0.3
    user_attempts: int = 8  # re-runs of one commit (same user + identifier) after unknown/storage errors
    # Writers start no new commit after this many seconds; what they skip is counted, and the run
    # fails only if fewer than ``min_attempted`` of the planned commits were attempted (a machine
    # busy with other work makes a race slower, not wrong).
    budget_s: float = 300.0
    min_attempted: float = 0.5
    barrier_timeout_s: float = 180.0  # spawning 11 interpreters on 2 busy cores takes a while
    seed: int = 20261129

    @property
    def processes(self) -> int:
        return self.writers + self.compactors + 1

    def table_options(self) -> dict[str, str]:
        return {"write-only": "true", "commit.max-retries": str(self.commit_max_retries),
                "commit.min-retry-wait": self.commit_min_retry_wait,
                "commit.max-retry-wait": self.commit_max_retry_wait}


# Sizes per store. CI: the 8 + 2 + 1 process shape everywhere, 200+ commits on the local disk and
# on SeaweedFS, fewer on moto, whose single Python process answers every request and is the
# slower server for this workload (measured: ~1 commit/s against ~2 on SeaweedFS, on 2 busy
# cores). A pause between a writer's commits did not change SeaweedFS's throughput here (its
# slowdown with 3+ contenders on one key is dwarfed by the commits' own cost), so there is none.
CI_SIZES: dict[str, TortureConfig] = {
    "local": TortureConfig(rounds=15),
    "moto": TortureConfig(rounds=6),
    "seaweed": TortureConfig(rounds=13),
}
# ``--long`` (``python -m benchmarks torture --long``): 100 commits per writer (50 rounds of two tables).
LONG_SIZES: dict[str, TortureConfig] = {
    "local": TortureConfig(rounds=50, budget_s=1800),
    "moto": TortureConfig(rounds=50, budget_s=1800),
    "seaweed": TortureConfig(rounds=50, budget_s=1800),
}


# ---- payloads (pure functions of writer and seq, so the checker can rebuild them) -------------

def append_row_count(writer: int, seq: int) -> int:
    return 3 + (writer * 7 + seq * 5) % 9


def append_rows(writer: int, seq: int) -> pa.Table:
    n = append_row_count(writer, seq)
    return pa.table({"part": [PARTS[(writer + seq + i) % 2] for i in range(n)], "writer": [writer] * n,
                     "seq": [seq] * n, "row_no": list(range(n)),
                     "note": [f"w{writer}-s{seq}-r{i}" for i in range(n)]}, schema=APPEND_SCHEMA)


def part_of(key: int) -> str:
    return PARTS[key % 2]


def value_of(key: int, writer: int, seq: int) -> int:
    return key * 1_000 + writer * 100 + seq


def shared_keys(writer: int, seq: int) -> list[int]:
    return sorted({SHARED_BASE + seq % SHARED_KEYS, SHARED_BASE + (seq + writer) % SHARED_KEYS})


@dataclass(frozen=True)
class PkChange:
    """One PK commit: keys upserted (owned and shared) and owned keys deleted (disjoint)."""

    upserts: tuple[int, ...]
    deletes: tuple[int, ...]
    shared: tuple[int, ...]


def pk_change(writer: int, seq: int) -> PkChange:
    start = (seq * 11) % OWNED_KEYS
    ring = [writer * 10_000 + (start + j) % OWNED_KEYS for j in range(UPSERTS + DELETES)]
    shared = shared_keys(writer, seq)
    return PkChange(tuple(ring[:UPSERTS] + shared), tuple(ring[UPSERTS:]), tuple(shared))


def pk_rows(writer: int, seq: int) -> tuple[pa.Table, pa.Table]:
    change = pk_change(writer, seq)
    keys = list(change.upserts)
    upserts = pa.table({"part": [part_of(k) for k in keys], "k": keys, "writer": [writer] * len(keys),
                        "seq": [seq] * len(keys), "v": [value_of(k, writer, seq) for k in keys]},
                       schema=PK_SCHEMA)
    deletes = pa.table({"part": [part_of(k) for k in change.deletes], "k": list(change.deletes)},
                       schema=pa.schema([PK_SCHEMA.field("part"), PK_SCHEMA.field("k")]))
    return upserts, deletes


# ---- setup ---------------------------------------------------------------------------------------

def create_tables(catalog: pc.Catalog, cfg: TortureConfig) -> None:
    catalog.create_database("torture", exist_ok=True)
    options = cfg.table_options()
    catalog.create_table(APPEND, schema=APPEND_SCHEMA, partition_keys=["part"], options={"bucket": "-1", **options})
    catalog.create_table(PK, schema=PK_SCHEMA, primary_keys=["part", "k"], partition_keys=["part"],
                         options={"bucket": str(cfg.buckets), **options})


@dataclass(frozen=True)
class Target:
    """Where the processes find the warehouse (picklable for spawn)."""

    warehouse: str
    storage_options: Mapping[str, Any] | None = None

    def catalog(self) -> pc.Catalog:
        return pc.Catalog(self.warehouse, storage_options=dict(self.storage_options or {}) or None)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"


# ---- writers -------------------------------------------------------------------------------------

class SlowPublishFileIO(FileIO):
    """The table's storage, with a random pause before each snapshot create (nothing else changes)."""

    def __init__(self, base: FileIO, pause_s: float, rng: random.Random) -> None:
        super().__init__(base.fs)
        self.pause_s = pause_s
        self.rng = rng

    def create_if_absent(self, path: str, data: bytes) -> bool:
        if "/snapshot/snapshot-" in path:
            time.sleep(self.rng.uniform(0, self.pause_s))
        return super().create_if_absent(path, data)


def _writer_table(table: pc.Table, writer: int, cfg: TortureConfig, rng: random.Random) -> pc.Table:
    if cfg.slow_publish_s <= 0 or writer % 4 != 3:
        return table
    return pc.Table(SlowPublishFileIO(table.file_io, cfg.slow_publish_s, rng), table.identifier, table.path)


def slices_pk(writer: int) -> bool:
    """Whether writer ``writer`` writes its PK commits as two slice writers."""
    return writer % 4 == 2


def superseded_rows(writer: int, seq: int) -> pa.Table:
    """Slice 0 of a sliced PK commit: every key the commit upserts or deletes, with a version
    slice 1 supersedes (``seq`` negated, so a visible row of it belongs to no commit)."""
    change = pk_change(writer, seq)
    keys = list(change.upserts + change.deletes)
    return pa.table({"part": [part_of(k) for k in keys], "k": keys, "writer": [writer] * len(keys),
                     "seq": [-seq] * len(keys), "v": [-value_of(k, writer, seq) for k in keys]},
                    schema=PK_SCHEMA)


def _commit_sliced(table: pc.Table, writer: int, seq: int, user: str) -> int | None:
    """A PK commit written by two slice writers, committed once by the user."""
    upserts, deletes = pk_rows(writer, seq)
    with table.new_write(input_slice=(0, 2)) as first:
        first.write(superseded_rows(writer, seq))
        earlier = first.prepare()
    with table.new_write(input_slice=(1, 2)) as second:
        second.write(upserts)
        second.delete(deletes)
        later = second.prepare()
    return table.commit([earlier, later], commit_user=user, commit_identifier=seq).snapshot_id


def _commit_once(table: pc.Table, kind: str, writer: int, seq: int, user: str, retries: int | None) -> int | None:
    if kind == "pk" and slices_pk(writer):
        return _commit_sliced(table, writer, seq, user)
    with table.new_write(commit_user=user, commit_identifier=seq) as write:
        if retries is not None:  # this writer's own commit.max-retries (a per-job option in Paimon)
            write.options = dataclasses.replace(write.options, commit_max_retries=retries)
        if kind == "append":
            write.write(append_rows(writer, seq))
        else:
            upserts, deletes = pk_rows(writer, seq)
            write.write(upserts)
            write.delete(deletes)
        return write.commit()


def _commit_as_a_user(table: pc.Table, kind: str, writer: int, seq: int, cfg: TortureConfig) -> dict[str, Any]:
    """One logical commit, re-run with the same user and identifier until its outcome is known."""
    user = f"writer-{writer}"
    retries = cfg.impatient_retries if writer % 2 == 1 else None
    record: dict[str, Any] = {"table": kind, "writer": writer, "seq": seq, "user": user, "outcome": "error",
                              "snapshot_id": None, "attempts": 0, "unknown": 0, "errors": []}
    started = time.monotonic()
    while record["attempts"] < cfg.user_attempts:
        record["attempts"] += 1
        try:
            record["snapshot_id"] = _commit_once(table, kind, writer, seq, user, retries)
            record["outcome"] = "ok" if record["snapshot_id"] is not None else "empty"
            break
        except CommitConflictError as exc:  # lost every retry: nothing landed, final
            record["outcome"] = "conflict"
            record["errors"].append(_describe(exc))
            break
        except CommitStateUnknownError as exc:  # re-running the same user + identifier is safe
            record["unknown"] += 1
            record["errors"].append(_describe(exc))
        except Exception as exc:  # e.g. the base snapshot expired under the commit: try again
            record["errors"].append(_describe(exc))
        time.sleep(0.05 * record["attempts"])
    else:
        record["outcome"] = "unresolved" if record["unknown"] else "error"
    record["seconds"] = round(time.monotonic() - started, 4)
    record["finished_at"] = time.time()
    return record


@contextmanager
def _reported(results: Any, role: str, index: int, report: dict[str, Any]) -> Iterator[None]:
    """Whatever happens in the process, the parent gets its report (a crash recorded in it)."""
    try:
        yield
    except BaseException as exc:
        report["fatal"] = _describe(exc) + "\n" + traceback.format_exc(limit=8)
    finally:
        report["finished_at"] = time.time()
        results.put((role, index, report))


def writer_main(target: Target, cfg: TortureConfig, writer: int, barrier: Any, results: Any) -> None:
    report: dict[str, Any] = {"records": [], "fatal": None, "skipped": 0}
    with _reported(results, "writer", writer, report):
        catalog = target.catalog()
        rng = random.Random(cfg.seed * 1_000 + writer)
        tables = {kind: _writer_table(catalog.get_table(name), writer, cfg, rng) for kind, name in TABLES.items()}
        barrier.wait(timeout=cfg.barrier_timeout_s)
        report["started_at"] = time.time()
        deadline = time.monotonic() + cfg.budget_s
        for seq in range(1, cfg.rounds + 1):
            order = ("append", "pk") if (writer + seq) % 2 == 0 else ("pk", "append")
            for kind in order:
                if time.monotonic() > deadline:
                    report["skipped"] += 1
                    continue
                report["records"].append(_commit_as_a_user(tables[kind], kind, writer, seq, cfg))
                if cfg.jitter_s:
                    time.sleep(rng.uniform(0, cfg.jitter_s))


# ---- compactors ----------------------------------------------------------------------------------

def compactor_main(target: Target, cfg: TortureConfig, index: int, barrier: Any, stop: Any, results: Any) -> None:
    report: dict[str, Any] = {"runs": [], "fatal": None}
    user = f"compactor-{index}"
    with _reported(results, "compactor", index, report):
        catalog = target.catalog()
        tables = {kind: catalog.get_table(name) for kind, name in TABLES.items()}
        rng = random.Random(cfg.seed * 2_000 + index)
        barrier.wait(timeout=cfg.barrier_timeout_s)
        report["started_at"] = time.time()
        deadline = time.monotonic() + cfg.budget_s + 60
        loop = 0
        while not stop.is_set() and time.monotonic() < deadline:
            # Mostly "its own" table (so compaction keeps up), every 4th run the other one, where
            # it races the other compactor; every 3rd run is a full compaction.
            kind = ("pk", "append")[(index + (loop % 4 == 3)) % 2]
            full = loop % 3 == 2
            run: dict[str, Any] = {"table": kind, "full": full, "user": user, "snapshot_id": None}
            started = time.monotonic()
            try:
                result = tables[kind].compact(full=full, commit_user=user)
                run["snapshot_id"] = result.snapshot_id
                run["outcome"] = "ok" if result.snapshot_id is not None else "nothing"
            except CommitConflictError as exc:
                run["outcome"], run["error"] = "conflict", _describe(exc)
            except CommitStateUnknownError as exc:
                run["outcome"], run["error"] = "unknown", _describe(exc)
            except Exception as exc:  # e.g. a file expired under a compaction planned on an old snapshot
                run["outcome"], run["error"] = "error", _describe(exc)
            run["seconds"] = round(time.monotonic() - started, 4)
            report["runs"].append(run)
            loop += 1
            time.sleep(rng.uniform(0, cfg.compaction_pause_s))


# ---- expiry --------------------------------------------------------------------------------------

def expiry_main(target: Target, cfg: TortureConfig, barrier: Any, stop: Any, results: Any) -> None:
    report: dict[str, Any] = {"runs": [], "fatal": None}
    with _reported(results, "expiry", 0, report):
        catalog = target.catalog()
        tables = {kind: catalog.get_table(name) for kind, name in TABLES.items()}
        barrier.wait(timeout=cfg.barrier_timeout_s)
        report["started_at"] = time.time()
        deadline = time.monotonic() + cfg.budget_s + 60
        loop = 0
        while not stop.is_set() and time.monotonic() < deadline:
            kind = ("append", "pk")[loop % 2]
            report["runs"].append(_expire(tables[kind], kind, cfg,
                                          orphans=loop % cfg.orphan_every == cfg.orphan_every - 1))
            loop += 1
            time.sleep(cfg.expiry_pause_s)
        for kind in ("append", "pk"):  # a last pass once the writers are done (bounds what is retained)
            report["runs"].append(_expire(tables[kind], kind, cfg, orphans=False))


def _expire(table: pc.Table, kind: str, cfg: TortureConfig, *, orphans: bool) -> dict[str, Any]:
    run: dict[str, Any] = {"table": kind, "expired": [], "orphans": None}
    try:
        plan = table.expire_snapshots(dry_run=False, older_than=dt.datetime.now(dt.UTC),
                                      retain_min=cfg.retain_min, retain_max=cfg.retain_max)
        run["expired"] = list(plan.snapshots)
        if orphans:  # the default window (a day) only: files of commits in flight are younger
            run["orphans"] = len(table.remove_orphan_files(dry_run=False).orphans)
        run["outcome"] = "ok"
    except Exception as exc:
        run["outcome"], run["error"] = "error", _describe(exc)
    return run


# ---- the race ------------------------------------------------------------------------------------

@dataclass
class RaceResult:
    """What every process reported, plus how the race went as seen from the parent."""

    config: TortureConfig
    writers: dict[int, dict[str, Any]] = field(default_factory=dict)
    compactors: dict[int, dict[str, Any]] = field(default_factory=dict)
    expiry: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)  # processes that never reported
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    wall_s: float = 0.0  # start of the first spawn to the last report
    race_s: float = 0.0  # barrier release to the last writer's last commit

    def writer_records(self) -> list[dict[str, Any]]:
        return [r for w in sorted(self.writers) for r in self.writers[w]["records"]]

    def compaction_runs(self) -> list[dict[str, Any]]:
        return [r for c in sorted(self.compactors) for r in self.compactors[c]["runs"]]

    def to_json(self) -> dict[str, Any]:
        return {"config": asdict(self.config), "writers": self.writers, "compactors": self.compactors,
                "expiry": self.expiry, "missing": self.missing, "exit_codes": self.exit_codes,
                "wall_s": self.wall_s, "race_s": self.race_s}


def run_torture(target: Target, cfg: TortureConfig) -> RaceResult:
    """Create the two tables, run the race, and return every process's report."""
    create_tables(target.catalog(), cfg)
    ctx = mp.get_context("spawn")
    barrier, stop, results = ctx.Barrier(cfg.processes), ctx.Event(), ctx.Queue()
    procs: dict[str, Any] = {}
    for w in range(cfg.writers):
        procs[f"writer-{w}"] = ctx.Process(target=writer_main, args=(target, cfg, w, barrier, results),
                                           name=f"torture-writer-{w}")
    for c in range(cfg.compactors):
        procs[f"compactor-{c}"] = ctx.Process(target=compactor_main, args=(target, cfg, c, barrier, stop, results),
                                              name=f"torture-compactor-{c}")
    procs["expiry-0"] = ctx.Process(target=expiry_main, args=(target, cfg, barrier, stop, results),
                                    name="torture-expiry")
    race = RaceResult(cfg)
    started = time.monotonic()
    for proc in procs.values():
        proc.start()
    reported: set[str] = set()
    hard_deadline = started + cfg.barrier_timeout_s + cfg.budget_s + 180
    try:
        while len(reported) < len(procs) and time.monotonic() < hard_deadline:
            try:
                role, index, report = results.get(timeout=1.0)
            except queue_module.Empty:
                dead = [name for name, p in procs.items() if name not in reported and p.exitcode is not None]
                for name in dead:  # died without a report (killed, segfault)
                    reported.add(name)
                    race.missing.append(name)
                    if name.startswith("writer-"):
                        race.writers[int(name.split("-")[1])] = {"records": [], "fatal": "died without a report",
                                                                 "skipped": 0}
            else:
                reported.add(f"{role}-{index}")
                if role == "writer":
                    race.writers[index] = report
                elif role == "compactor":
                    race.compactors[index] = report
                else:
                    race.expiry = report
            if all(f"writer-{w}" in reported for w in range(cfg.writers)):
                stop.set()
        race.missing += [name for name in procs if name not in reported]
    finally:
        stop.set()
        for name, proc in procs.items():
            proc.join(timeout=30)
            if proc.is_alive():  # only the processes this function started, by their handle
                proc.kill()
                proc.join(timeout=10)
            race.exit_codes[name] = proc.exitcode
        results.close()
    race.wall_s = round(time.monotonic() - started, 3)
    starts = [float(w["started_at"]) for w in race.writers.values() if w.get("started_at")]
    ends = [r["finished_at"] for r in race.writer_records()]
    if starts and ends:
        race.race_s = round(max(ends) - min(starts), 3)
    return race

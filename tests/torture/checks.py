"""The invariants a torture race must keep, and its figures (shared by the test and the benchmark).

:func:`verify` compares what the processes reported (:class:`~tests.torture.workload.RaceResult`)
with what storage says afterwards:

* every process reported, none crashed, every writer commit got a final outcome;
* no snapshot id is claimed twice (writers' and compactors' reported ids, per table); every id
  from 1 to the latest is claimed exactly once; retained ids are contiguous; every retained
  snapshot holds the commit user, identifier and kind of its claimant; the ids below the earliest
  are exactly those the expiry process reported expiring;
* every commit reported ok is visible exactly once (append: each ``(writer, seq)`` has exactly
  its rows; PK: the final table equals the reference replayed from the successful commits in
  snapshot-id order); no commit reported as a conflict is visible anywhere;
* every retained snapshot reads completely and equals the reference replayed up to it;
* after a forced orphan cleanup (only once every process stopped) the table reads the same, and
  no retained snapshot lost a file.

The shared PK keys, which every writer upserts, must hold the newest write of one of the writers
that wrote them (Paimon orders concurrent writers of a bucket by their own sequence numbers, not
by commit order; see :func:`_shared_candidates`), in their own category so a failure names itself.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import pyarrow as pa

import paimon_core as pc
from tests.torture.workload import (
    APPEND,
    PK,
    SHARED_BASE,
    RaceResult,
    Target,
    append_row_count,
    part_of,
    pk_change,
    shared_keys,
    value_of,
)

T = TypeVar("T")
SHARED = "shared keys: a writer's newest write of the key"
MAX_MESSAGES = 12  # per category


@dataclass
class Verdict:
    """Failures by category (empty: every invariant held) and the figures of the run."""

    failures: dict[str, list[str]] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)

    def fail(self, category: str, message: str) -> None:
        messages = self.failures.setdefault(category, [])
        if len(messages) < MAX_MESSAGES:
            messages.append(message)
        elif len(messages) == MAX_MESSAGES:
            messages.append("... (more)")

    @property
    def ok(self) -> bool:
        return not self.failures

    def describe(self) -> str:
        lines = []
        for category, messages in self.failures.items():
            lines.append(f"{category}:")
            lines += [f"  - {m}" for m in messages]
        return "\n".join(lines) or "all invariants held"


Row = tuple[Any, ...]
PkState = dict[int, tuple[str, int, int, int]]  # k -> (part, writer, seq, v)


def _replay_pk(commits: Iterable[tuple[int, int, int]]) -> PkState:
    """The PK table after the (snapshot id, writer, seq) commits, applied in snapshot-id order."""
    state: PkState = {}
    for _, writer, seq in sorted(commits):
        change = pk_change(writer, seq)
        for key in change.upserts:
            state[key] = (part_of(key), writer, seq, value_of(key, writer, seq))
        for key in change.deletes:
            state.pop(key, None)
    return state


def _shared_candidates(commits: Iterable[tuple[int, int, int]]) -> dict[int, set[tuple[int, int]]]:
    """Per shared key, each writer's newest successful write of it: Paimon's merge order across
    writers of one bucket is the sequence number each writer counts from the snapshot it started
    on, so of two concurrent commits either may win a key both wrote (as in Java Paimon;
    ``sequence.field`` orders them by data); a writer's own later write always wins over its
    earlier ones."""
    newest: dict[tuple[int, int], int] = {}
    for _, writer, seq in sorted(commits):
        for key in shared_keys(writer, seq):
            newest[(key, writer)] = max(seq, newest.get((key, writer), seq))
    out: dict[int, set[tuple[int, int]]] = {}
    for (key, writer), seq in newest.items():
        out.setdefault(key, set()).add((writer, seq))
    return out


def _pk_state(data: pa.Table) -> tuple[PkState, list[int]]:
    """Rows by key, and keys that appear more than once (a broken merge)."""
    state: PkState = {}
    duplicates = []
    columns = data.select(["part", "k", "writer", "seq", "v"]).to_pydict()
    for part, k, writer, seq, v in zip(*columns.values()):
        if k in state:
            duplicates.append(k)
        state[k] = (part, writer, seq, v)
    return state, duplicates


def _append_groups(data: pa.Table) -> dict[tuple[int, int], list[int]]:
    groups: dict[tuple[int, int], list[int]] = {}
    columns = data.select(["writer", "seq", "row_no"]).to_pydict()
    for writer, seq, row_no in zip(*columns.values()):
        groups.setdefault((writer, seq), []).append(row_no)
    return groups


def _canonical(data: pa.Table) -> list[Row]:
    return sorted(tuple(row.values()) for row in data.to_pylist())


class _TableCheck:
    """The checks of one table (``kind`` "append" or "pk")."""

    def __init__(self, verdict: Verdict, race: RaceResult, table: pc.Table, kind: str) -> None:
        self.v = verdict
        self.race = race
        self.table = table
        self.kind = kind
        self.records = [r for r in race.writer_records() if r["table"] == kind]
        self.ok = [r for r in self.records if r["outcome"] == "ok"]
        self.conflicts = [r for r in self.records if r["outcome"] == "conflict"]
        self.compactions = [r for r in race.compaction_runs() if r["table"] == kind]
        # (snapshot id, writer, seq) of every successful writer commit
        self.ok_commits = [(r["snapshot_id"], r["writer"], r["seq"]) for r in self.ok]
        self.snapshot_of = {(r["writer"], r["seq"]): r["snapshot_id"] for r in self.ok}
        self.reads: dict[int | None, list[Row]] = {}  # canonical reads before the orphan cleanup

    def label(self, message: str) -> str:
        return f"[{self.kind}] {message}"

    # ---- ids ------------------------------------------------------------------------------------

    def check_ids(self) -> list[pc.Snapshot]:
        v, kind = self.v, self.kind
        claims: dict[int, list[str]] = {}
        for sid, writer, seq in self.ok_commits:
            claims.setdefault(sid, []).append(f"writer-{writer}#{seq}")
        for run in self.compactions:
            if run["outcome"] == "ok":
                claims.setdefault(run["snapshot_id"], []).append(f"{run['user']} COMPACT")
        for sid, who in sorted(claims.items()):
            if len(who) > 1:
                v.fail("duplicate snapshot ids", self.label(f"snapshot {sid} claimed by {who}"))
        snapshots = self.table.snapshots()
        ids = [s.id for s in snapshots]
        if not ids:
            v.fail("snapshots", self.label("no snapshot left"))
            return snapshots
        if ids != list(range(ids[0], ids[-1] + 1)):
            v.fail("snapshot ids not contiguous", self.label(f"retained ids {ids}"))
        unknown_compactions = {r["user"] for r in self.compactions if r["outcome"] == "unknown"}
        for sid in range(1, ids[-1] + 1):
            if sid not in claims and not (sid in ids and self._unknown_compaction(sid, unknown_compactions)):
                v.fail("snapshot nobody reported", self.label(f"snapshot {sid} is not the reported result of "
                                                              f"any commit{self._who(sid, snapshots)}"))
        for sid in sorted(s for s in claims if s > ids[-1]):
            v.fail("reported commit not on storage", self.label(f"snapshot {sid} ({claims[sid]}) was reported "
                                                                f"but the latest snapshot is {ids[-1]}"))
        by_id = {s.id: s for s in snapshots}
        for sid, who in claims.items():
            snapshot = by_id.get(sid)
            if snapshot is None or len(who) != 1:
                continue
            claimant = who[0]
            if claimant.startswith("writer-"):
                user, seq = claimant.split("#")
                good = (snapshot.commit_user, snapshot.commit_identifier, snapshot.commit_kind) == \
                    (user, int(seq), "APPEND")
            else:
                good = (snapshot.commit_user, snapshot.commit_kind) == (claimant.split()[0], "COMPACT")
            if not good:
                v.fail("snapshot content differs from its claimant", self.label(
                    f"snapshot {sid} reported by {claimant} holds {snapshot.commit_user}/"
                    f"{snapshot.commit_identifier}/{snapshot.commit_kind}"))
        conflicted = {(f"writer-{r['writer']}", r["seq"]) for r in self.conflicts}
        for snapshot in snapshots:
            if (snapshot.commit_user, snapshot.commit_identifier) in conflicted:
                v.fail("conflicted commit visible", self.label(
                    f"snapshot {snapshot.id} holds {snapshot.commit_user}#{snapshot.commit_identifier}, "
                    "which was reported as a conflict"))
        expired = [sid for run in self.race.expiry.get("runs", []) if run["table"] == kind for sid in run["expired"]]
        twice = sorted(sid for sid, n in Counter(expired).items() if n > 1)
        if twice:
            v.fail("expiry", self.label(f"snapshots expired twice (their ids were used again): {twice[:10]}"))
        if set(expired) != set(range(1, ids[0])):
            v.fail("expiry", self.label(f"expired ids {sorted(set(expired))[:5]}... ({len(set(expired))}) are not "
                                        f"exactly 1..{ids[0] - 1}"))
        return snapshots

    def _unknown_compaction(self, sid: int, users: set[str]) -> bool:
        try:
            snapshot = self.table.snapshot(sid)
        except pc.PaimonError:
            return False
        return snapshot.commit_kind == "COMPACT" and snapshot.commit_user in users

    def _who(self, sid: int, snapshots: list[pc.Snapshot]) -> str:
        for s in snapshots:
            if s.id == sid:
                return f" (it holds {s.commit_user}#{s.commit_identifier} {s.commit_kind})"
        return " (expired)"

    # ---- data -----------------------------------------------------------------------------------

    def check_append(self, data: pa.Table, upto: int | None = None) -> int:
        """Each successful commit (up to snapshot ``upto``) exactly once; returns how many are visible."""
        groups = _append_groups(data)
        expected = {(w, s) for sid, w, s in self.ok_commits if upto is None or sid <= upto}
        where = "final table" if upto is None else f"snapshot {upto}"
        visible = 0
        for key in sorted(expected):
            rows = groups.get(key, [])
            n = append_row_count(*key)
            if sorted(rows) == list(range(n)):
                visible += 1
            else:
                self.v.fail("successful commit not visible exactly once", self.label(
                    f"{where}: writer {key[0]} seq {key[1]} (snapshot {self.snapshot_of[key]}) has row_no "
                    f"{sorted(rows)}, expected 0..{n - 1}"))
        conflicted = {(r["writer"], r["seq"]) for r in self.conflicts}
        for key in sorted(set(groups) - expected):
            category = "conflicted commit visible" if key in conflicted else "rows of no successful commit"
            self.v.fail(category, self.label(f"{where}: {len(groups[key])} rows of writer {key[0]} seq {key[1]}"))
        return visible

    def check_pk(self, data: pa.Table, upto: int | None = None) -> None:
        where = "final table" if upto is None else f"snapshot {upto}"
        actual, duplicates = _pk_state(data)
        if duplicates:
            self.v.fail("PK read returned a key twice", self.label(f"{where}: keys {duplicates[:5]}"))
        commits = [c for c in self.ok_commits if upto is None or c[0] <= upto]
        expected = _replay_pk(commits)
        owned = {k for k in set(actual) | set(expected) if k < SHARED_BASE}
        wrong = sorted(k for k in owned if actual.get(k) != expected.get(k))
        for k in wrong[:5]:
            self.v.fail("PK table differs from the reference", self.label(
                f"{where}: key {k} is {actual.get(k)}, expected {expected.get(k)} (part, writer, seq, v)"))
        if len(wrong) > 5:
            self.v.fail("PK table differs from the reference", self.label(f"{where}: {len(wrong)} keys differ"))
        ok_pairs = {(w, s) for _, w, s in commits}
        foreign = sorted({(row[1], row[2]) for row in actual.values()} - ok_pairs)
        conflicted = {(r["writer"], r["seq"]) for r in self.conflicts}
        for pair in foreign[:5]:
            category = "conflicted commit visible" if pair in conflicted else "rows of no successful commit"
            self.v.fail(category, self.label(f"{where}: rows of writer {pair[0]} seq {pair[1]}"))
        candidates = _shared_candidates(commits)
        for k in sorted(k for k in set(actual) | set(candidates) if k >= SHARED_BASE):
            row = actual.get(k)
            if row is None or (row[1], row[2]) not in candidates.get(k, set()):
                self.v.fail(SHARED, self.label(self._shared_detail(where, k, row, candidates.get(k, set()))))

    def _shared_detail(self, where: str, key: int, actual: Any, candidates: set[tuple[int, int]]) -> str:
        held = "absent" if actual is None else f"writer {actual[1]} seq {actual[2]}"
        return (f"{where}: shared key {key} holds {held}; expected the newest write of one of the writers "
                f"that wrote it: {sorted(candidates)}")

    def check_data(self, snapshots: list[pc.Snapshot]) -> dict[str, Any]:
        """The final table and every retained snapshot against the reference; canonical reads."""
        figures: dict[str, Any] = {}
        reads = self.reads
        final = self.table.read()  # the latest snapshot: the final table
        reads[None] = _canonical(final)
        if self.kind == "append":
            figures["visible_exactly_once"] = self.check_append(final)
        else:
            self.check_pk(final)
        latest = self.table.latest_snapshot()
        for snapshot in snapshots:
            try:
                data = final if latest is not None and snapshot.id == latest.id else \
                    self.table.read(snapshot_id=snapshot.id)
            except Exception as exc:
                self.v.fail("retained snapshot unreadable", self.label(
                    f"snapshot {snapshot.id}: {type(exc).__name__}: {exc}"))
                continue
            reads[snapshot.id] = _canonical(data)
            if self.kind == "append":
                self.check_append(data, upto=snapshot.id)
                if snapshot.total_record_count != data.num_rows:
                    self.v.fail("snapshot row count differs from its data", self.label(
                        f"snapshot {snapshot.id} says {snapshot.total_record_count} rows, reads {data.num_rows}"))
            else:
                self.check_pk(data, upto=snapshot.id)
        figures["retained_snapshots_read"] = len(reads) - 1
        return figures

    def check_after_orphan_cleanup(self, snapshots: list[pc.Snapshot]) -> int:
        """Forced orphan cleanup (every process stopped, so nothing is in flight); afterwards the
        final table and the earliest retained snapshot read the same, and every data file of every
        retained snapshot is still on storage (names are unique, so one listing tells)."""
        cleanup = self.table.remove_orphan_files(older_than=int(time.time() * 1000) + 1_000, dry_run=False,
                                                 force=True)
        ids = [s.id for s in snapshots]
        for sid in dict.fromkeys([None, *ids[:1]]):
            try:
                again = _canonical(self.table.read() if sid is None else self.table.read(snapshot_id=sid))
            except Exception as exc:
                self.v.fail("orphan cleanup broke a read", self.label(f"snapshot {sid}: {type(exc).__name__}: {exc}"))
                continue
            if sid in self.reads and again != self.reads[sid]:
                self.v.fail("orphan cleanup broke a read", self.label(f"snapshot {sid} reads differently"))
        io = self.table.file_io
        on_storage = {path.rstrip("/").rsplit("/", 1)[-1] for path in io.fs.find(self.table.path)}
        for sid in ids:
            try:
                gone = sorted({f.file_name for f in self.table.files(sid)} - on_storage)
            except Exception as exc:
                self.v.fail("orphan cleanup broke a read", self.label(f"snapshot {sid}: {type(exc).__name__}: {exc}"))
                continue
            if gone:
                self.v.fail("orphan cleanup broke a read", self.label(
                    f"snapshot {sid} lost {len(gone)} data files, e.g. {gone[0]}"))
        return len(cleanup.orphans)

    # ---- figures --------------------------------------------------------------------------------

    def commit_figures(self) -> dict[str, Any]:
        seconds = sorted(r["seconds"] for r in self.ok) or [0.0]
        errors = Counter(e.split(":")[0] for r in self.records for e in r["errors"]
                         if not e.startswith("CommitConflictError"))
        runs = self.compactions
        return {
            "commits_attempted": len(self.records),
            "commits_ok": len(self.ok),
            "commits_conflict": len(self.conflicts),
            "commits_unknown_state_seen": sum(r["unknown"] for r in self.records),
            "commits_unresolved": sum(1 for r in self.records if r["outcome"] not in ("ok", "conflict")),
            "commits_retried_after_error": sum(1 for r in self.records
                                               if any(not e.startswith("CommitConflictError") for e in r["errors"])),
            "retry_errors": dict(errors),
            "commit_p50_s": round(statistics.median(seconds), 3),
            "commit_p99_s": round(seconds[min(len(seconds) - 1, int(len(seconds) * 0.99))], 3),
            "compactions_run": len(runs),
            "compactions_ok": sum(1 for r in runs if r["outcome"] == "ok"),
            "compactions_nothing": sum(1 for r in runs if r["outcome"] == "nothing"),
            "compactions_conflict": sum(1 for r in runs if r["outcome"] == "conflict"),
            "compactions_error": sum(1 for r in runs if r["outcome"] in ("error", "unknown")),
            "compaction_errors": dict(Counter(r["error"].split(":")[0] for r in runs
                                              if r["outcome"] in ("error", "unknown"))),
            "expired_snapshots": sum(len(r["expired"]) for r in self.race.expiry.get("runs", [])
                                     if r["table"] == self.kind),
        }


def _check_processes(verdict: Verdict, race: RaceResult) -> None:
    for name in race.missing:
        verdict.fail("process never reported", name)
    for name, code in race.exit_codes.items():
        if code != 0:
            verdict.fail("process exit code", f"{name} exited with {code}")
    reports = [(f"writer-{i}", r) for i, r in race.writers.items()]
    reports += [(f"compactor-{i}", r) for i, r in race.compactors.items()]
    reports += [("expiry", race.expiry)] if race.expiry else []
    for name, report in reports:
        if report.get("fatal"):
            verdict.fail("process crashed", f"{name}: {report['fatal']}")
    cfg = race.config
    planned = cfg.writers * cfg.rounds * 2
    attempted = len(race.writer_records())
    if attempted < cfg.min_attempted * planned:
        verdict.fail("race too slow", f"only {attempted} of {planned} planned writer commits were attempted "
                                      f"within the {cfg.budget_s:.0f} s budget")
    for record in race.writer_records():
        if record["outcome"] not in ("ok", "conflict"):
            verdict.fail("commit outcome never resolved", f"[{record['table']}] writer {record['writer']} seq "
                                                           f"{record['seq']}: {record['outcome']} after "
                                                           f"{record['attempts']} attempts: {record['errors'][-3:]}")


def _guarded(verdict: Verdict, kind: str, what: str, action: Callable[[], T]) -> T | None:
    """``action()``, or None with a failure naming the exception: one broken invariant (a snapshot
    whose metadata is gone, say) must not hide the others."""
    try:
        return action()
    except Exception as exc:
        verdict.fail("check crashed", f"[{kind}] {what}: {type(exc).__name__}: {exc}")
        return None


def verify(target: Target, race: RaceResult) -> Verdict:
    """Check every invariant after a race; the figures are filled in even when checks fail."""
    verdict = Verdict()
    _check_processes(verdict, race)
    catalog = target.catalog()
    figures: dict[str, Any] = {}
    checks = {kind: _TableCheck(verdict, race, catalog.get_table(name), kind)
              for kind, name in (("append", APPEND), ("pk", PK))}
    retained: dict[str, list[pc.Snapshot]] = {}
    started = time.monotonic()
    for kind, check in checks.items():
        figures[kind] = check.commit_figures()
        retained[kind] = _guarded(verdict, kind, "checking snapshot ids", check.check_ids) or []
        figures[kind]["retained_snapshot_ids"] = [s.id for s in retained[kind][:1] + retained[kind][-1:]]
        figures[kind].update(_guarded(verdict, kind, "reading", partial(check.check_data, retained[kind])) or {})
    read_s = time.monotonic() - started
    for kind, check in checks.items():
        clean = partial(check.check_after_orphan_cleanup, retained[kind])
        figures[kind]["orphans_removed_after"] = _guarded(verdict, kind, "the forced orphan cleanup", clean)
    cfg = race.config
    ok = sum(figures[k]["commits_ok"] for k in checks)
    runs = race.expiry.get("runs", [])
    figures["total"] = {
        "processes": f"{cfg.writers} writers + {cfg.compactors} compactors + 1 expiry",
        "commits_planned": cfg.writers * cfg.rounds * 2,
        "commits_attempted": sum(figures[k]["commits_attempted"] for k in checks),
        "commits_ok": ok,
        "commits_conflict": sum(figures[k]["commits_conflict"] for k in checks),
        "commits_unknown_state_seen": sum(figures[k]["commits_unknown_state_seen"] for k in checks),
        "commits_retried_after_error": sum(figures[k]["commits_retried_after_error"] for k in checks),
        "append_visible_exactly_once": figures["append"].get("visible_exactly_once"),
        "compactions_ok": sum(figures[k]["compactions_ok"] for k in checks),
        "compactions_conflict": sum(figures[k]["compactions_conflict"] for k in checks),
        "compactions_error": sum(figures[k]["compactions_error"] for k in checks),
        "expiry_runs": len(runs),
        "expiry_errors": sum(1 for r in runs if r.get("outcome") != "ok"),
        "expiry_error_kinds": dict(Counter(r["error"].split(":")[0] for r in runs if r.get("outcome") != "ok")),
        "expired_snapshots": sum(len(r["expired"]) for r in runs),
        "wall_s": race.wall_s,
        "race_s": race.race_s,
        "commits_per_s": round(ok / race.race_s, 2) if race.race_s else None,
        "verify_reads_s": round(read_s, 1),
        "verify_orphans_s": round(time.monotonic() - started - read_s, 1),
    }
    verdict.figures = figures
    return verdict

"""Concurrency torture with real processes, on the local disk, SeaweedFS and moto.

8 writer processes + 2 compaction processes + 1 expiry process race on a PK table and an append
table, two of the writers writing their PK commits as two slice writers (the workload:
``tests/torture/workload.py``; the invariants: ``tests/torture/checks.py``).
Sizes per store are :data:`~tests.torture.workload.CI_SIZES`; ``python -m benchmarks
torture --long`` runs 100 commits per writer. The figures of each run are printed (``-rP`` shows them)
and saved as ``<pytest basetemp>/torture/<store>.json``.
"""

from __future__ import annotations

import json

import pytest

from tests.support.s3.store import Store
from tests.torture.checks import SHARED, Verdict, verify
from tests.torture.workload import CI_SIZES, RaceResult, Target, run_torture


def _summary(kind: str, race: RaceResult, verdict: Verdict) -> str:
    cfg = race.config
    lines = [f"torture [{kind}]: {cfg.writers} writers x {cfg.rounds} rounds x 2 tables, {cfg.compactors} "
             f"compactors, 1 expiry"]
    for table in ("append", "pk"):
        f = verdict.figures.get(table, {})
        lines.append(f"  {table}: attempted {f.get('commits_attempted')}, ok {f.get('commits_ok')}, conflict "
                     f"{f.get('commits_conflict')}, unknown-state seen {f.get('commits_unknown_state_seen')}, "
                     f"retried after error {f.get('commits_retried_after_error')}, visible exactly once "
                     f"{f.get('visible_exactly_once', '-')}, compactions ok/nothing/conflict/error "
                     f"{f.get('compactions_ok')}/{f.get('compactions_nothing')}/{f.get('compactions_conflict')}/"
                     f"{f.get('compactions_error')}, expired {f.get('expired_snapshots')}, retained read "
                     f"{f.get('retained_snapshots_read')}, orphans after {f.get('orphans_removed_after')}, "
                     f"commit p50/p99 {f.get('commit_p50_s')}/{f.get('commit_p99_s')} s")
    lines.append(f"  total: {json.dumps(verdict.figures.get('total'))}")
    return "\n".join(lines)


def test_processes_racing_keep_every_invariant(store: Store, tmp_path_factory: pytest.TempPathFactory) -> None:
    target = Target(store.warehouse, store.storage_options)
    race = run_torture(target, CI_SIZES[store.kind])
    verdict = verify(target, race)
    out = tmp_path_factory.getbasetemp() / "torture" / f"{store.kind}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"store": store.kind, "figures": verdict.figures, "failures": verdict.failures,
                               "race": race.to_json()}, indent=1, default=str))
    print(_summary(store.kind, race, verdict))
    print(f"saved {out}")
    others = Verdict({c: m for c, m in verdict.failures.items() if c != SHARED})
    assert others.ok, others.describe()
    # Kept strict on purpose (a lost update would hide here): the shared keys every writer upserts
    # must end with the value of the successful commit with the highest snapshot id.
    shared = Verdict({c: m for c, m in verdict.failures.items() if c == SHARED})
    assert shared.ok, shared.describe()

"""Concurrency torture: 8 writers + 2 compactors + 1 expiry process on a PK and an append table.

The workload and its invariants are those of ``tests/torture`` (see ``tests/torture/workload.py``
and ``tests/torture/checks.py``); this suite runs them at the CI size or, with ``--long``, at
100 commits per writer (50 rounds, each one commit to each table), on the local disk and on the
S3 servers (SeaweedFS and moto with its write-serialising shim, started on 127.0.0.1 and stopped
by PID unless ``make test``-style ``PAIMON_TEST_S3_*`` variables announce running ones). The
workload starts its own racing processes, so this suite runs it from the driver. It reports one
row of figures per store and the invariants that failed (exit status 1 if any did).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import signal
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.report import markdown
from benchmarks.harness.runner import wait_quiet
from benchmarks.harness.suite import Result, SuiteRun
from tests.support.s3 import servers as s3_servers
from tests.support.s3.store import STORE_KINDS, Store
from tests.torture.checks import SHARED, verify
from tests.torture.workload import CI_SIZES, LONG_SIZES, Target, TortureConfig, run_torture

log = logging.getLogger("benchmarks.torture")

ENGINES = ("ours",)
WORK_DIRS = ("stores",)
DEFAULT_REPS = 1
# --quick: the local disk only, 3 writers (one impatient) + 1 compactor + expiry, 3 rounds.
QUICK = TortureConfig(writers=3, rounds=3, compactors=1)
HEADER = ["store", "writers x rounds x tables", "attempted", "ok", "conflict", "unknown seen", "retried",
          "append visible once", "compactions ok/conflict/error", "expired", "orphans after", "race s", "wall s",
          "verify s", "commits/s", "p99 commit s", "invariants"]


def run_store(kind: str, cfg: TortureConfig, servers: dict[str, s3_servers.S3Server], work: Path,
              quiet_wait: float) -> dict[str, Any]:
    store = Store.local(str(work / kind / "warehouse")) if kind == "local" else Store.on(servers[kind])
    target = Target(store.warehouse, store.storage_options)
    pressure = wait_quiet(quiet_wait)
    log.info("%s: %d writers x %d rounds (2 tables), %d compactors, 1 expiry", kind, cfg.writers, cfg.rounds,
             cfg.compactors)
    race = run_torture(target, cfg)
    started = time.monotonic()
    verdict = verify(target, race)
    verify_s = round(time.monotonic() - started, 3)
    log.info("%s: %s", kind, "PASS" if verdict.ok else "FAIL\n" + verdict.describe())
    return {"store": kind, "config": dataclasses.asdict(cfg), "figures": verdict.figures, "verify_s": verify_s,
            "failures": verdict.failures, "race": race.to_json(), "cpu_pressure": pressure}


def row(result: dict[str, Any]) -> list[str]:
    total = result["figures"]["total"]
    cfg = result["config"]
    failed = [c for c in result["failures"] if c != SHARED]
    verdict = "PASS" if not result["failures"] else ("FAIL: " + "; ".join(result["failures"]))
    if not failed and result["failures"]:
        verdict = "FAIL (shared-key merge order only)"
    p99 = max(result["figures"][k]["commit_p99_s"] for k in ("append", "pk"))
    return [result["store"], f"{cfg['writers']}x{cfg['rounds']}x2", str(total["commits_attempted"]),
            str(total["commits_ok"]), str(total["commits_conflict"]), str(total["commits_unknown_state_seen"]),
            str(total["commits_retried_after_error"]), str(total["append_visible_exactly_once"]),
            f"{total['compactions_ok']}/{total['compactions_conflict']}/{total['compactions_error']}",
            str(total["expired_snapshots"]),
            str(sum(result["figures"][k]["orphans_removed_after"] for k in ("append", "pk"))),
            f"{total['race_s']:.1f}", f"{total['wall_s']:.1f}", f"{result['verify_s']:.1f}",
            str(total["commits_per_s"]), f"{p99:.2f}", verdict]


def failures(results: list[dict[str, Any]]) -> list[str]:
    """Every failed invariant as ``store: category: message``."""
    return [f"{r['store']}: {category}: {message}" for r in results
            for category, messages in r["failures"].items() for message in messages]


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(f"terminated by signal {signum}")


def run(run: SuiteRun) -> Result:
    args = run.args
    signal.signal(signal.SIGTERM, _terminate)  # so the servers started here are stopped on kill
    kinds = ["local"] if args.quick else (list(STORE_KINDS) if args.store == "all" else [args.store])
    servers = s3_servers.from_env()
    started: list[s3_servers.S3Server] = []
    work = run.work / "stores"
    work.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for kind in kinds:
            if kind != "local" and kind not in servers:
                server = (s3_servers.start_seaweed if kind == "seaweed" else s3_servers.start_moto)(str(work))
                started.append(server)
                s3_servers.wait_ready(server)
                servers[kind] = server
            given = (("writers", args.writers), ("rounds", args.rounds), ("jitter_s", args.jitter))
            sizes = QUICK if args.quick else (LONG_SIZES if args.long else CI_SIZES)[kind]
            cfg = dataclasses.replace(sizes, **{k: v for k, v in given if v is not None})
            results.append(run_store(kind, cfg, servers, work, args.quiet_wait))
    finally:
        for server in started:
            s3_servers.stop(server)
    run.meta.update(long=args.long)
    problems = failures(results)
    lines = [markdown(HEADER, [row(r) for r in results])]
    for result in results:
        if result["failures"]:
            lines.append(f"{result['store']}: invariants that failed\n" + "\n".join(
                f"  {category}:\n" + "\n".join(f"    - {m}" for m in messages)
                for category, messages in result["failures"].items()))
    size = "--quick" if args.quick else ("--long" if args.long else "CI size")
    return Result(f"Concurrency torture ({size})", "\n\n".join(lines), {"long": args.long, "results": results},
                  problems)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--long", action="store_true", help="100 commits per writer instead of the CI size")
    parser.add_argument("--store", choices=[*STORE_KINDS, "all"], default="all")
    parser.add_argument("--writers", type=int, help="override the number of writer processes")
    parser.add_argument("--rounds", type=int, help="override the rounds per writer (one commit per table each)")
    parser.add_argument("--jitter", type=float, help="override the writers' pause between commits (seconds)")


def configure(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    logging.getLogger("paimon_core").setLevel(logging.WARNING)

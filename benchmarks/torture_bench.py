"""Concurrency torture: 8 writers + 2 compactors + 1 expiry process on a PK and an append table.

The workload and its invariants are those of ``tests/torture`` (see ``tests/torture/workload.py``
and ``tests/torture/checks.py``); this driver runs them at the CI size or, with ``--long``, at
100 commits per writer (50 rounds, each one commit to each table), on the local disk and on the
S3 servers (SeaweedFS and moto with its write-serialising shim, started on 127.0.0.1 and stopped
by PID unless ``make test``-style ``PAIMON_TEST_S3_*`` variables announce running ones).

    .venv/bin/python benchmarks/torture_bench.py                      # CI sizes, every store: ~3 min
    .venv/bin/python benchmarks/torture_bench.py --long               # 8 x 100 commits per store
    .venv/bin/python benchmarks/torture_bench.py --store local --long

It prints one row of figures per store and the invariants that failed (if any), writes
everything to ``.bench/torture_bench.json``, and exits non-zero if an invariant failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for entry in (str(REPO), str(HERE)):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from bench_common import markdown  # noqa: E402

from tests.s3 import servers as s3_servers  # noqa: E402
from tests.s3.store import STORE_KINDS, Store  # noqa: E402
from tests.torture.checks import SHARED, verify  # noqa: E402
from tests.torture.workload import CI_SIZES, LONG_SIZES, Target, TortureConfig, run_torture  # noqa: E402

log = logging.getLogger("torture_bench")


def run_store(kind: str, cfg: TortureConfig, servers: dict[str, s3_servers.S3Server], work: Path) -> dict[str, Any]:
    store = Store.local(str(work / kind / "warehouse")) if kind == "local" else Store.on(servers[kind])
    target = Target(store.warehouse, store.storage_options)
    log.info("%s: %d writers x %d rounds (2 tables), %d compactors, 1 expiry", kind, cfg.writers, cfg.rounds,
             cfg.compactors)
    race = run_torture(target, cfg)
    started = time.monotonic()
    verdict = verify(target, race)
    verify_s = round(time.monotonic() - started, 3)
    log.info("%s: %s", kind, "PASS" if verdict.ok else "FAIL\n" + verdict.describe())
    return {"store": kind, "config": dataclasses.asdict(cfg), "figures": verdict.figures, "verify_s": verify_s,
            "failures": verdict.failures, "race": race.to_json()}


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


HEADER = ["store", "writers x rounds x tables", "attempted", "ok", "conflict", "unknown seen", "retried",
          "append visible once", "compactions ok/conflict/error", "expired", "orphans after", "race s", "wall s",
          "verify s", "commits/s", "p99 commit s", "invariants"]


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(f"terminated by signal {signum}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--long", action="store_true", help="100 commits per writer instead of the CI size")
    parser.add_argument("--store", choices=[*STORE_KINDS, "all"], default="all")
    parser.add_argument("--writers", type=int, help="override the number of writer processes")
    parser.add_argument("--rounds", type=int, help="override the rounds per writer (one commit per table each)")
    parser.add_argument("--jitter", type=float, help="override the writers' pause between commits (seconds)")
    parser.add_argument("--json", type=Path, default=REPO / ".bench" / "torture_bench.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("paimon_core").setLevel(logging.WARNING)
    signal.signal(signal.SIGTERM, _terminate)  # so the servers started here are stopped on kill
    kinds = list(STORE_KINDS) if args.store == "all" else [args.store]
    sizes = LONG_SIZES if args.long else CI_SIZES
    servers = s3_servers.from_env()
    started: list[s3_servers.S3Server] = []
    work = Path(tempfile.mkdtemp(prefix="torture-bench-"))
    results = []
    try:
        for kind in kinds:
            if kind != "local" and kind not in servers:
                server = (s3_servers.start_seaweed if kind == "seaweed" else s3_servers.start_moto)(str(work))
                started.append(server)
                s3_servers.wait_ready(server)
                servers[kind] = server
            given = (("writers", args.writers), ("rounds", args.rounds), ("jitter_s", args.jitter))
            overrides = {k: v for k, v in given if v is not None}
            cfg = dataclasses.replace(sizes[kind], **overrides)
            results.append(run_store(kind, cfg, servers, work))
    finally:
        for server in started:
            s3_servers.stop(server)
        shutil.rmtree(work, ignore_errors=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"long": args.long, "results": results}, indent=1, default=str))
    print(f"\nConcurrency torture ({'--long' if args.long else 'CI size'}):\n")
    print(markdown(HEADER, [row(r) for r in results]))
    for result in results:
        if result["failures"]:
            print(f"\n{result['store']}: invariants that failed")
            for category, messages in result["failures"].items():
                print(f"  {category}:")
                for message in messages:
                    print(f"    - {message}")
    print(f"\nsaved {args.json}")
    if any(r["failures"] for r in results):
        raise SystemExit(1)


if __name__ == "__main__":
    main()

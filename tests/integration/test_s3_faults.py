"""Fault trials on SeaweedFS and moto: S3 requests of commits, compactions, expiry and orphan
cleanup broken by a loopback proxy (:mod:`tests.support.s3.fault_proxy`).

A trial runs one operation on a table with committed state through the faulty proxy, then checks
with a clean client (the server's own endpoint, no proxy):

* the table reads, and holds exactly the rows of the commits known to have landed;
* snapshot ids are contiguous, the hints resolve to the listed ends, no commit
  (user, identifier, kind) is applied twice, and every file a retained snapshot references exists;
* told success: the commit is visible exactly once; told ``CommitConflictError`` or any error
  other than ``CommitStateUnknownError``: nothing of it is visible; told
  ``CommitStateUnknownError``: re-running the same commit (same user and identifier) through a
  clean client leaves it visible exactly once.

Client retry layers (each can hide a fault from our code): botocore (legacy mode: 4 retries),
s3fs's own loop (``S3FileSystem.retries`` = 5 attempts on connection errors and SlowDown, set
per instance here), and aiohttp, which re-sends an idempotent request (PUT included) once when a
reused keep-alive connection drops. Modes: ``default`` keeps all; ``max_attempts=1`` sets
``config_kwargs={"retries": {"max_attempts": 1}}`` (legacy mode counts *retries*: 2 attempts);
``none`` sets ``total_max_attempts=1`` and s3fs's retries to 1, so a fault on every attempt
reaches our code. Both servers run their trials at once, each on ``LANES`` tables in parallel.
A failed expiry or orphan cleanup is re-run with the clean client, which must finish it.

Run with ``-rP`` to see the trial counts per fault kind and outcome.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import http.server
import random
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc_compute
import pytest

import paimon_core as pc
from paimon_core.errors import CommitConflictError, CommitStateUnknownError
from paimon_core.snapshot import BATCH_COMMIT_IDENTIFIER
from tests.support.s3.fault_proxy import Exchange, FaultProxy, Rule
from tests.support.s3.servers import S3Server
from tests.support.s3.store import Store

NAME = "db.t"
SCHEMA = pa.schema([("id", pa.int64()), ("qty", pa.int64())])
ROWS = 5
KEEP = 2  # snapshots an expiry trial keeps
FUTURE = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
OPTIONS = {"write-only": "true", "snapshot.num-retained.min": "1", "commit.max-retries": "2",
           "commit.min-retry-wait": "10 ms", "commit.max-retry-wait": "100 ms"}
TRIAL_TIMEOUT_S = 60.0
RANDOM_TRIALS = 40
SEED = 20261129
SERVERS = ("seaweed", "moto")
LANES = 2  # concurrent tables per server (the servers answer in ms; the client side waits)

_TIMEOUTS = {"connect_timeout": 2, "read_timeout": 5}
# mode -> (botocore config_kwargs, s3fs retries or None for its default)
MODES: dict[str, tuple[dict[str, Any], int | None]] = {
    "default": (dict(_TIMEOUTS), None),
    "max_attempts=1": ({**_TIMEOUTS, "retries": {"max_attempts": 1}}, None),
    "none": ({**_TIMEOUTS, "retries": {"total_max_attempts": 1}}, 1),
    "short-none": ({"connect_timeout": 2, "read_timeout": 1, "retries": {"total_max_attempts": 1}}, 1),
}

SNAPSHOT = r"/snapshot/snapshot-\d+$"


def deletes(key: str) -> Callable[[Exchange], bool]:
    """A DELETE of a key matching ``key``, or a DeleteObjects (``POST ?delete``) naming one."""
    def match(exchange: Exchange) -> bool:
        if exchange.method == "DELETE":
            return re.search(key, exchange.path) is not None
        keys = re.findall(rb"<Key>([^<]*)</Key>", exchange.body)
        return exchange.method == "POST" and "delete" in exchange.query.split("&")[0] and \
            any(re.search(key, k.decode()) for k in keys)
    return match


# The interesting requests: (method, regex on the unquoted path?query, extra Rule fields).
TARGETS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "snapshot_create": ("PUT", SNAPSHOT, {"header": "If-None-Match"}),
    "latest_hint": ("PUT", r"/snapshot/LATEST$", {}),
    "earliest_hint": ("PUT", r"/snapshot/EARLIEST$", {}),
    # the GET of a snapshot this client tried to create: the read-back after a 412 or a failure
    "readback": ("GET", SNAPSHOT, {"after_method": "PUT"}),
    "manifest_put": ("PUT", r"/manifest/manifest-[0-9a-f]{8}-", {}),
    "manifest_list_put": ("PUT", r"/manifest/manifest-list-", {}),
    "data_put": ("PUT", r"/bucket-\d+/data-[^/]*\.parquet$", {}),
    "data_get": ("GET", r"/bucket-\d+/data-[^/]*\.parquet$", {}),
    "snapshot_head": ("HEAD", SNAPSHOT, {}),
    "snapshot_get": ("GET", SNAPSHOT, {}),
    "hint_get": ("GET", r"/snapshot/(LATEST|EARLIEST)$", {}),
    "snapshot_list": ("GET", r"[?&]prefix=[^&]*/snapshot/", {}),
    "list_any": ("GET", r"[?&]list-type=2", {}),
    "manifest_get": ("GET", r"/manifest/", {}),
    # DELETE, or DeleteObjects (POST ?delete) naming such a key
    "delete_snapshot": ("", "", {"predicate": deletes(SNAPSHOT)}),
    "delete_data": ("", "", {"predicate": deletes(r"/bucket-\d+/data-")}),
    "delete_manifest": ("", "", {"predicate": deletes(r"/manifest/")}),
}
OP_TARGETS = {
    "write": ["snapshot_create", "snapshot_create", "latest_hint", "readback", "manifest_put",
              "manifest_list_put", "data_put", "snapshot_head", "snapshot_get", "hint_get", "snapshot_list"],
    "compact": ["snapshot_create", "readback", "latest_hint", "manifest_list_put", "data_put", "data_get",
                "manifest_get", "snapshot_get"],
    "expire": ["delete_snapshot", "delete_data", "delete_manifest", "earliest_hint", "snapshot_get",
               "manifest_get", "snapshot_list"],
    "orphans": ["delete_data", "delete_manifest", "snapshot_list", "list_any", "snapshot_get", "manifest_get"],
}
KINDS = ("drop_request", "drop_response", "status_503", "status_500", "delay", "reset_midway")
OUTCOMES = ("ok", "conflict", "unknown", "error", "hang")


def rule(target: str, action: str, **fields: Any) -> Rule:
    method, path, extra = TARGETS[target]
    return Rule(action, method=method or None, path=path, name=f"{target}:{action}", **{**extra, **fields})


class TrialHang(Exception):
    pass


def run_with_timeout(fn: Callable[[], Any], timeout_s: float = TRIAL_TIMEOUT_S) -> Any:
    """``fn()`` in a thread; a hang fails the trial instead of the whole run."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=target, name="fault-trial", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise TrialHang(f"operation still running after {timeout_s}s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def classify(exc: BaseException | None) -> str:
    if exc is None:
        return "ok"
    if isinstance(exc, CommitStateUnknownError):
        return "unknown"
    if isinstance(exc, CommitConflictError):
        return "conflict"
    if isinstance(exc, TrialHang):
        return "hang"
    return "error"


@dataclass
class Trial:
    op: str  # write / compact / expire / orphans
    mode: str
    rules: list[Rule]
    label: str
    expect: set[str] | None = None  # outcomes allowed (None: any; the invariants hold regardless)
    kind: str = ""
    target: str = ""
    setup: Callable[[Bench], None] | None = None


@dataclass
class Result:
    trial: Trial
    outcome: str
    error: str
    fired: int
    seconds: float  # in the operation
    violations: list[str] = field(default_factory=list)
    overhead: float = 0.0  # preparing, checking and settling (clean client)

    def line(self, server: str) -> str:
        problems = f"  !! {'; '.join(self.violations)}" if self.violations else ""
        error = f"  <{self.error[:110]}>" if self.error and not problems else ""
        return (f"  {server:7} {self.outcome:8} {self.seconds:5.2f}s fired={self.fired:2} "
                f"{self.trial.label}{problems}{error}")


@dataclass
class Observation:
    """What a clean client sees after a trial."""

    ids: list[int]
    snapshots: dict[int, pc.Snapshot]
    counts: dict[int, int]  # qty -> rows

    def of_user(self, user: str) -> list[pc.Snapshot]:
        return [s for s in self.snapshots.values() if s.commit_user == user]


class Bench:
    """One table on one server, a clean client, and faulty clients through one proxy."""

    def __init__(self, server: S3Server, proxy: FaultProxy) -> None:
        self.server = server
        self.proxy = proxy
        self.store = Store.on(server)
        catalog = self.store.catalog()
        catalog.create_database("db")
        self.clean = catalog.create_table(NAME, schema=SCHEMA, options=OPTIONS)
        self.table_dir = f"{self.store.root}/db.db/t"
        self.expected: dict[int, int] = {}  # qty -> visible rows (each commit writes its own qty)
        self.next_qty = 1
        self._snapshots: dict[tuple[int, str], pc.Snapshot] = {}  # (id, etag): immutable once there
        self._files: dict[tuple[int, str], list[str]] = {}
        self._appends = 0  # data files added since the last compaction (reads get slower with each)
        self._last_compaction = 0
        self.clean_write()
        self.clean_write()

    # ---- clients --------------------------------------------------------------------------

    def faulty_table(self, mode: str) -> pc.Table:
        config, s3fs_retries = MODES[mode]
        options = self.server.storage_options(self.proxy.endpoint)
        options["config_kwargs"] = dict(config)
        catalog = pc.Catalog(self.store.warehouse, storage_options=options)
        fs: Any = catalog.file_io.fs  # one cached instance per mode (their options differ)
        fs.retries = s3fs_retries if s3fs_retries is not None else type(fs).retries
        return catalog.get_table(NAME)

    def batch(self, qty: int) -> pa.Table:
        return pa.table({"id": list(range(qty * 1000, qty * 1000 + ROWS)), "qty": [qty] * ROWS}, schema=SCHEMA)

    def new_qty(self) -> int:
        self.next_qty += 1
        return self.next_qty - 1

    def clean_write(self) -> int | None:
        qty = self.new_qty()
        snapshot_id = self.clean.write(self.batch(qty))
        self.expected[qty] = ROWS
        self._appends += 1
        return snapshot_id

    def racer_write(self, _: Exchange | None = None) -> None:
        """Another writer commits first (the proxy calls this before forwarding our create)."""
        self.clean_write()

    def racer_compact(self, _: Exchange | None = None) -> None:
        self.clean.compact(full=True)

    def expire_clean(self, retain: int = KEEP) -> None:
        self.clean.expire_snapshots(dry_run=False, older_than=FUTURE, retain_max=retain)

    # ---- observing -------------------------------------------------------------------------

    def _listing(self) -> dict[int, str]:
        found = {}
        for info in self.store.fs.ls(f"{self.table_dir}/snapshot", detail=True):
            name = info["name"].rsplit("/", 1)[-1]
            if name.startswith("snapshot-"):
                found[int(name.split("-", 1)[1])] = str(info.get("ETag") or info.get("size"))
        return found

    def observe(self, *, deep: bool = False) -> tuple[Observation, list[str]]:
        """The table as a clean client sees it, and every invariant it breaks."""
        problems: list[str] = []
        listing = self._listing()
        ids = sorted(listing)
        if not ids:
            return Observation([], {}, {}), ["no snapshot left"]
        if ids != list(range(ids[0], ids[-1] + 1)):
            problems.append(f"snapshot ids not contiguous: {ids}")
        store = self.clean.snapshot_store
        if (store.earliest_id(), store.latest_id()) != (ids[0], ids[-1]):
            problems.append(f"hints resolve to {store.earliest_id()}..{store.latest_id()}, listing {ids}")
        snapshots = {}
        for i in ids:
            key = (i, listing[i])
            if key not in self._snapshots:
                self._snapshots[key] = self.clean.snapshot(i)
            snapshots[i] = self._snapshots[key]
        commits = collections.Counter((s.commit_user, s.commit_identifier, s.commit_kind)
                                      for s in snapshots.values() if s.commit_identifier != BATCH_COMMIT_IDENTIFIER)
        twice = [c for c, n in commits.items() if n > 1]
        if twice:
            problems.append(f"commits applied more than once: {twice}")
        if deep:
            present = set(self.store.files("db.db/t"))
            for i in ids:
                key = (i, listing[i])
                if key not in self._files:
                    self._files[key] = [f"bucket-{f.bucket}/{f.file_name}" for f in self.clean.files(snapshot_id=i)]
                missing = [f for f in self._files[key] if f"db.db/t/{f}" not in present]
                if missing:
                    problems.append(f"snapshot {i} references missing files {missing}")
        qty = self.clean.read(["qty"])["qty"]
        counts = {int(c["values"]): int(c["counts"]) for c in pc_compute.value_counts(qty).to_pylist()}
        return Observation(ids, snapshots, counts), problems

    # ---- one trial -------------------------------------------------------------------------

    def prepare(self, trial: Trial) -> None:
        if trial.setup is not None:
            trial.setup(self)
        elif trial.op == "compact":
            self.clean_write()
        elif trial.op == "expire":
            while len(self._listing()) < KEEP + 2:
                self.clean_write()
        elif trial.op == "orphans":  # leftovers of crashed writers
            for _ in range(2):
                self.store.fs.pipe_file(f"{self.table_dir}/bucket-0/data-orphan-{uuid.uuid4()}.parquet", b"junk")
                self.store.fs.pipe_file(f"{self.table_dir}/manifest/manifest-orphan-{uuid.uuid4()}", b"junk")

    def run(self, trial: Trial) -> Result:
        begun = time.monotonic()
        self.prepare(trial)
        qty = self.new_qty()
        user = f"trial-{qty}-{uuid.uuid4().hex[:8]}"
        ops: dict[str, Callable[[], Any]] = {
            "write": lambda: self.faulty_table(trial.mode).write(self.batch(qty), commit_user=user,
                                                                 commit_identifier=1),
            "compact": lambda: self.faulty_table(trial.mode).compact(full=True, commit_user=user),
            "expire": lambda: self.faulty_table(trial.mode).expire_snapshots(
                dry_run=False, older_than=FUTURE, retain_max=KEEP),
            "orphans": lambda: self.faulty_table(trial.mode).remove_orphan_files(
                older_than=FUTURE, dry_run=False, force=True),
        }
        self.proxy.set_rules(trial.rules)
        started = time.monotonic()
        value: Any = None
        error: BaseException | None = None
        try:
            value = run_with_timeout(ops[trial.op])
        except Exception as exc:  # classified below
            error = exc
        seconds = time.monotonic() - started
        fired = trial.rules[-1].fired if trial.rules else 0  # the fault of interest (not a set-up rule)
        self.proxy.set_rules([])
        outcome = classify(error)
        result = Result(trial, outcome, "" if error is None else f"{type(error).__name__}: {error}", fired, seconds)
        if trial.expect is not None and outcome not in trial.expect:
            result.violations.append(f"told {outcome} ({result.error[:200]}), expected {sorted(trial.expect)}")
        if outcome == "hang":
            return result
        seen, problems = self.observe(deep=trial.op in ("expire", "orphans"))
        checks: dict[str, Callable[..., Observation]] = {
            "write": self._check_write, "compact": self._check_compact, "expire": self._check_expire,
            "orphans": self._check_orphans}
        seen = checks[trial.op](result, seen, qty=qty, user=user, value=value)
        if seen.counts != self.expected:
            diff = {q: (seen.counts.get(q, 0), self.expected.get(q, 0)) for q in set(seen.counts) | set(self.expected)
                    if seen.counts.get(q, 0) != self.expected.get(q, 0)}
            problems.append(f"rows per commit (seen, expected) differ: {diff}")
            self.expected = dict(seen.counts)  # report it once, not in every later trial
        result.violations += problems
        self._settle(seen)
        result.overhead = time.monotonic() - begun - seconds
        return result

    def _check_write(self, result: Result, seen: Observation, *, qty: int, user: str, value: Any) -> Observation:
        v = result.violations
        rows, mine = seen.counts.get(qty, 0), seen.of_user(user)
        if result.outcome == "ok":
            if rows != ROWS or [s.id for s in mine] != [value]:
                v.append(f"told ok (snapshot {value}) but {rows} rows in snapshots {[s.id for s in mine]} are visible")
        elif result.outcome == "unknown":
            if (rows, len(mine)) not in ((0, 0), (ROWS, 1)):
                v.append(f"unknown outcome left {rows} rows in {len(mine)} snapshots")
            again = self.clean.write(self.batch(qty), commit_user=user, commit_identifier=1)
            seen, problems = self.observe()
            v += problems
            rows, mine = seen.counts.get(qty, 0), seen.of_user(user)
            if rows != ROWS or [s.id for s in mine] != [again]:
                v.append(f"re-run after the unknown outcome: {rows} rows in snapshots {[s.id for s in mine]}, "
                         f"the re-run said {again}")
        elif rows or mine:
            v.append(f"told {result.outcome} ({result.error[:200]}) but {rows} rows in snapshots "
                     f"{[s.id for s in mine]} are visible")
        if rows:
            self.expected[qty] = rows
            self._appends += 1
        return seen

    def _check_compact(self, result: Result, seen: Observation, *, user: str, value: Any, **_: Any) -> Observation:
        v = result.violations
        mine = [s.id for s in seen.of_user(user)]
        if any(s.commit_kind != "COMPACT" for s in seen.of_user(user)):
            v.append("the compaction committed a non-COMPACT snapshot")
        if result.outcome == "ok":
            if mine != ([value.snapshot_id] if value.snapshot_id is not None else []):
                v.append(f"told ok (snapshot {value.snapshot_id}) but its snapshots are {mine}")
        elif len(mine) > 1 or (mine and result.outcome != "unknown"):
            v.append(f"told {result.outcome} ({result.error[:200]}) but its snapshots {mine} landed")
        return seen

    def _check_expire(self, result: Result, seen: Observation, *, value: Any, **_: Any) -> Observation:
        if result.outcome == "ok":
            kept = [i for i in value.snapshots if i in seen.ids]
            if kept or (value.snapshots and seen.ids[0] != value.earliest_after):
                result.violations.append(f"told ok but expired snapshots {kept} remain, earliest {seen.ids[0]} "
                                         f"(planned {value.earliest_after})")
            return seen
        return self._rerun_cleanly(result, self.expire_clean)

    def _check_orphans(self, result: Result, seen: Observation, **_: Any) -> Observation:
        junk = [p for p in self.store.files("db.db/t") if "-orphan-" in p]
        if result.outcome == "ok":
            if junk:
                result.violations.append(f"told ok but orphans remain: {junk}")
            return seen
        return self._rerun_cleanly(result, lambda: self.clean.remove_orphan_files(
            older_than=FUTURE, dry_run=False, force=True))

    def _rerun_cleanly(self, result: Result, rerun: Callable[[], Any]) -> Observation:
        """After a failed expiry or cleanup (possibly half done): a clean re-run finishes it."""
        try:
            rerun()
        except Exception as exc:  # a violation, not a crash of the harness
            result.violations.append(f"a clean re-run after the failure failed: {type(exc).__name__}: {exc}")
        seen, problems = self.observe(deep=True)
        result.violations += [f"after the clean re-run: {p}" for p in problems]
        return seen

    def _settle(self, seen: Observation) -> None:
        """Keep the table small between trials (clean client): fewer files, fewer snapshots."""
        compactions = [i for i in seen.ids if seen.snapshots[i].commit_kind == "COMPACT"]
        if compactions and compactions[-1] > self._last_compaction:
            self._last_compaction = compactions[-1]
            self._appends = sum(1 for i in seen.ids if i > compactions[-1])
        if self._appends > 3:
            self.racer_compact()
            self._appends = 0
        if len(seen.ids) > KEEP + 4:
            self.expire_clean(KEEP + 1)


def run_on_both(s3_servers: Mapping[str, S3Server], trials: Callable[[Bench], Iterable[Trial]],
                lanes: int = 1) -> dict[str, list[Result]]:
    """Each server's trials in ``lanes`` threads, each with its own table, proxy and clients;
    lane k runs trials k, k + lanes, ... of the (deterministic) list ``trials`` makes."""
    results: dict[str, list[list[Result]]] = {name: [[] for _ in range(lanes)] for name in SERVERS}
    failures: dict[str, BaseException] = {}

    def work(name: str, lane: int) -> None:
        try:
            with FaultProxy(s3_servers[name].endpoint) as proxy:
                bench = Bench(s3_servers[name], proxy)
                for i, trial in enumerate(trials(bench)):
                    if i % lanes == lane:
                        results[name][lane].append(bench.run(trial))
        except BaseException as exc:  # re-raised in the test thread
            failures[f"{name}/{lane}"] = exc

    threads = [threading.Thread(target=work, args=(name, lane), name=f"trials-{name}-{lane}")
               for name in SERVERS for lane in range(lanes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name, exc in failures.items():
        raise AssertionError(f"trials on {name} broke off") from exc
    return {name: [r for lane in per_lane for r in lane] for name, per_lane in results.items()}


def report(title: str, results: dict[str, list[Result]]) -> list[str]:
    """Print every trial and the counts per fault kind; return the violations."""
    failed = []
    for server, server_results in results.items():
        print(f"\n== {title} on {server}: {len(server_results)} trials, "
              f"{sum(r.seconds for r in server_results):.1f}s in operations, "
              f"{sum(r.overhead for r in server_results):.1f}s preparing and checking")
        for r in server_results:
            print(r.line(server))
        failed += [f"{server}: {r.trial.label}: {'; '.join(r.violations)}" for r in server_results if r.violations]
    print(f"\n== {title}: trials per fault kind (both servers) and what the client was told")
    table: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for server_results in results.values():
        for r in server_results:
            table[r.trial.kind][r.outcome] += 1
            table[r.trial.kind]["fired" if r.fired else "not fired"] += 1
            table[r.trial.kind]["violations"] += bool(r.violations)
    print(f"  {'fault kind':15} trials fired | " + " ".join(f"{o:>8}" for o in OUTCOMES) + " | violations")
    for kind in sorted(table):
        c = table[kind]
        print(f"  {kind:15} {c['fired'] + c['not fired']:6} {c['fired']:5} | "
              + " ".join(f"{c[o]:8}" for o in OUTCOMES) + f" | {c['violations']:10}")
    return failed


# ---- the proxy itself -----------------------------------------------------------------------

class _Echo(http.server.BaseHTTPRequestHandler):
    """Upstream for the proxy's own test: answers ``METHOD path body-length body``."""

    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str, bytes]] = []

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).seen.append((self.command, self.path, body))
        payload = f"{self.command} {self.path} {len(body)} ".encode() + body + b"." * 200
        self.send_response(200)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_PUT = do_HEAD = do_DELETE = _answer

    def log_message(self, *args: Any) -> None:
        pass


def _read_response(sock: socket.socket, *, head_only: bool = False) -> bytes:
    """Everything until the server closes or a full Content-Length body arrived."""
    data = b""
    while True:
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep and b"100 Continue" not in head:
            length = 0 if head_only else int(next((line.split(b":")[1] for line in head.split(b"\r\n")
                                                   if line.lower().startswith(b"content-length")), b"0"))
            if len(body) >= length:
                return data
        elif sep:
            data = body
            continue
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def test_fault_proxy_forwards_and_breaks_requests() -> None:
    """Keep-alive, chunked bodies, ``Expect: 100-continue`` and every action, on a stdlib upstream."""
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    _Echo.seen = []
    rules = [Rule("status_503", method="GET", path="^/slow"), Rule("drop_request", method="PUT", path="^/lost-req"),
             Rule("drop_response", method="PUT", path="^/lost-ans", header="If-None-Match"),
             Rule("reset_midway", method="GET", path="^/cut"), Rule("delay=200", method="HEAD", path="^/late"),
             Rule("status_500", method="DELETE", path="^/x", nth=2, times=None)]
    try:
        with FaultProxy(f"http://127.0.0.1:{upstream.server_address[1]}", rules) as proxy:
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
                sock.sendall(b"PUT /b/k HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                             b"Expect: 100-continue\r\n\r\n")
                assert sock.recv(100).startswith(b"HTTP/1.1 100 Continue")
                sock.sendall(b"5\r\nhello\r\n3\r\n, w\r\n0\r\n\r\n")
                assert b"PUT /b/k 8 hello, w" in _read_response(sock)
                for path, expected in [("/slow", b"<Code>SlowDown</Code>"), ("/b/k", b"GET /b/k 0"),
                                       ("/x", b"DELETE"), ("/x", b"<Code>InternalError</Code>")]:
                    method = "DELETE" if path == "/x" else "GET"
                    sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: h\r\n\r\n".encode())
                    assert expected in _read_response(sock), path  # one keep-alive connection
                started = time.monotonic()
                sock.sendall(b"HEAD /late HTTP/1.1\r\nHost: h\r\n\r\n")
                answer = _read_response(sock, head_only=True)
                assert b"Content-Length: 213" in answer and time.monotonic() - started >= 0.2
            for path, header in [("/lost-req", ""), ("/lost-ans", "If-None-Match: *\r\n")]:
                with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
                    sock.sendall(f"PUT {path} HTTP/1.1\r\nHost: h\r\n{header}Content-Length: 2\r\n\r\nhi".encode())
                    assert _read_response(sock) == b"", path
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
                sock.sendall(b"GET /cut HTTP/1.1\r\nHost: h\r\n\r\n")
                with contextlib.suppress(ConnectionResetError):
                    partial = _read_response(sock)
                    assert 0 < len(partial) < 200, partial
            assert [p for _, p, _ in _Echo.seen] == ["/b/k", "/b/k", "/x", "/late", "/lost-ans", "/cut"]
            assert [(e.method, e.path, e.action) for e in proxy.faults()] == [
                ("GET", "/slow", "status_503"), ("DELETE", "/x", "status_500"), ("HEAD", "/late", "delay=200"),
                ("PUT", "/lost-req", "drop_request"), ("PUT", "/lost-ans", "drop_response"),
                ("GET", "/cut", "reset_midway")]
            assert proxy.requests("PUT", "lost-ans")[0].headers["if-none-match"] == "*"
            assert proxy.requests("PUT", "lost-ans")[0].status == 200  # the server applied it
            port = proxy.port
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
    finally:
        upstream.shutdown()
        upstream.server_close()


# ---- reproductions --------------------------------------------------------------------------

def _assert_settled(s3_servers: dict[str, S3Server], trial: Callable[[], Trial]) -> None:
    """The trial on both servers (fresh rules each): the commit lands, so the writer must be told
    success or CommitStateUnknownError (never a plain error), and every invariant holds."""
    results = run_on_both(s3_servers, lambda bench: [trial()])
    failed = report(results["moto"][0].trial.label, results)
    told = {name: f"{rs[0].outcome} {rs[0].error[:150]}" for name, rs in results.items()}
    assert all(rs[0].outcome in ("ok", "unknown") for rs in results.values()), f"the writer was told {told}"
    assert not failed, "\n".join(failed)


def test_lost_answers_to_the_create_put_leave_the_outcome_unknown_not_failed(
        s3_servers: dict[str, S3Server]) -> None:
    """The create-PUT of snapshot-N lands and every answer to it is lost (retries exhausted).
    s3fs raises botocore's ConnectionClosedError for that, which is not an OSError: FileIO and
    the commit loop catch only OSError, so it escapes raw although snapshot-N is ours."""
    _assert_settled(s3_servers, lambda: Trial(
        "write", "none", [rule("snapshot_create", "drop_response", times=None)],
        "create-PUT answer lost on every attempt", None, "drop_response"))


def test_lost_answers_to_the_latest_hint_do_not_fail_a_landed_commit(s3_servers: dict[str, S3Server]) -> None:
    """LATEST is a best-effort hint written after snapshot-N was created; a transport error
    writing it (ConnectionClosedError, not an OSError) escapes ``_write_hint`` and fails the
    landed commit."""
    _assert_settled(s3_servers, lambda: Trial(
        "write", "none", [rule("latest_hint", "drop_response", times=None)],
        "LATEST hint PUT answer lost on every attempt", None, "drop_response"))


def test_storage_error_after_an_uncertain_attempt_is_reported_unknown(s3_servers: dict[str, S3Server]) -> None:
    """The create lands, its answer is lost, the client's retry gets 412 and the read-back GET
    keeps failing (500): the attempt is uncertain, and the next storage error of the retry loop
    (``latest()`` reading snapshot-N) must surface as CommitStateUnknownError, not OSError."""
    _assert_settled(s3_servers, lambda: Trial(
        "write", "max_attempts=1",
        [rule("snapshot_create", "drop_response"), rule("readback", "status_500", times=None)],
        "read-back GET after 412 fails always", None, "status_500"))


# ---- directed trials ------------------------------------------------------------------------

def _compact_first(bench: Bench) -> None:
    """Data files for an expiry to free: a compaction, then enough snapshots after it."""
    bench.clean_write()
    bench.racer_compact()
    bench.clean_write()
    bench.clean_write()


def _drop_latest_hint(bench: Bench) -> None:
    """Without the hint, finding the latest snapshot lists the snapshot directory."""
    bench.store.fs.rm_file(f"{bench.table_dir}/snapshot/LATEST")


def directed_trials(bench: Bench) -> list[Trial]:
    """Each fault kind at each interesting point, with the outcome it must have where it is fixed."""
    ok, err, settled = {"ok"}, {"error"}, {"ok", "unknown"}
    create = "snapshot_create"

    def t(label: str, op: str, mode: str, rules: list[Rule], expect: set[str] | None,
          setup: Callable[[Bench], None] | None = None) -> Trial:
        return Trial(op, mode, rules, label, expect, rules[-1].label, rules[-1].name.split(":")[0], setup)

    return [
        # the key case: the create lands, its answer is lost
        t("create-PUT answer lost, client retries (-> 412 -> read-back finds ours)", "write", "default",
          [rule(create, "drop_response")], ok),
        t("create-PUT answer lost, retries max_attempts=1", "write", "max_attempts=1",
          [rule(create, "drop_response")], ok),
        t("create-PUT answer lost on every attempt, no retries (our unknown-outcome path)", "write", "none",
          [rule(create, "drop_response", times=None)], settled),
        t("create-PUT never forwarded, no retries", "write", "none", [rule(create, "drop_request")], ok),
        t("create-PUT 503 once, client retries", "write", "default", [rule(create, "status_503")], ok),
        t("create-PUT 500 always, no retries", "write", "none", [rule(create, "status_500", times=None)],
          {"unknown"}),
        t("create-PUT reset midway once, no retries", "write", "none", [rule(create, "reset_midway")], ok),
        t("create-PUT delayed past the read timeout, no retries", "write", "short-none",
          [rule(create, "delay=1500")], settled),
        t("LATEST hint PUT 500 always", "write", "none", [rule("latest_hint", "status_500", times=None)], ok),
        t("LATEST hint PUT answer lost always", "write", "none",
          [rule("latest_hint", "drop_response", times=None)], ok),
        t("read-back GET after 412 fails once", "write", "default",
          [rule(create, "drop_response"), rule("readback", "status_500")], ok),
        t("read-back GET after 412 fails always", "write", "max_attempts=1",
          [rule(create, "drop_response"), rule("readback", "status_500", times=None)], settled),
        t("racing writer wins every attempt", "write", "default",
          [rule(create, "pass", times=None, before=bench.racer_write)], {"conflict"}),
        t("racing writer wins, then the read-back after 412 fails", "write", "none",
          [rule(create, "pass", before=bench.racer_write),
           rule("readback", "status_500", after_status=412, times=None)], None),
        t("manifest PUT 500 always", "write", "none", [rule("manifest_put", "status_500", times=None)], err),
        t("manifest-list PUT answer lost always", "write", "none",
          [rule("manifest_list_put", "drop_response", times=None)], err),
        t("data PUT never forwarded", "write", "none", [rule("data_put", "drop_request", times=None)], err),
        t("snapshot HEAD 500 always", "write", "none", [rule("snapshot_head", "status_500", times=None)], err),
        t("snapshot dir LIST 500 always (no LATEST hint)", "write", "none",
          [rule("snapshot_list", "status_500", times=None)], err, _drop_latest_hint),
        t("compaction create-PUT answer lost, no retries", "compact", "none",
          [rule(create, "drop_response", times=None)], settled),
        t("compaction loses to a racing compaction", "compact", "default",
          [rule(create, "pass", before=bench.racer_compact)], {"conflict"}),
        t("compaction data GET reset midway always", "compact", "none",
          [rule("data_get", "reset_midway", times=None)], err),
        t("expiry snapshot DELETE answer lost once, client retries", "expire", "default",
          [rule("delete_snapshot", "drop_response")], ok),
        t("expiry data DELETE never forwarded", "expire", "none",
          [rule("delete_data", "drop_request", times=None)], err, _compact_first),
        t("expiry EARLIEST hint PUT 500", "expire", "none", [rule("earliest_hint", "status_500", times=None)], ok),
        t("expiry snapshot GET 500 from the 2nd on", "expire", "none",
          [rule("snapshot_get", "status_500", nth=2, times=None)], err),
        t("orphan DELETE answer lost", "orphans", "none", [rule("delete_data", "drop_response", times=None)], err),
        t("orphan manifest GET 500 from the 3rd on", "orphans", "none",
          [rule("manifest_get", "status_500", nth=3, times=None)], err),
    ]


def test_directed_faults(s3_servers: dict[str, S3Server]) -> None:
    results = run_on_both(s3_servers, directed_trials, lanes=LANES)
    failed = report("directed fault trials", results)
    assert not failed, "\n".join(failed)
    unfired = [r.trial.label for rs in results.values() for r in rs if not r.fired]
    assert not unfired, f"faults that never applied (the trial tested nothing): {unfired}"


# ---- randomised trials ----------------------------------------------------------------------

# How often an operation sends a request (a fault on a later one never applies), and what makes a
# target happen at all: an expiry frees data files only after a compaction; writers list the
# snapshot directory only without a LATEST hint.
MAX_NTH = {"snapshot_create": 1, "latest_hint": 1, "earliest_hint": 1, "manifest_put": 1, "data_put": 1,
           "readback": 1, "manifest_list_put": 2}
SETUPS: dict[tuple[str, str], Callable[[Bench], None]] = {
    ("expire", "delete_data"): _compact_first, ("expire", "delete_manifest"): _compact_first,
    ("write", "snapshot_list"): _drop_latest_hint, ("compact", "snapshot_list"): _drop_latest_hint,
    ("expire", "snapshot_list"): _drop_latest_hint,
}


def random_trials(rng: random.Random, count: int) -> Iterable[Trial]:
    for _ in range(count):
        op = rng.choices(["write", "compact", "expire", "orphans"], weights=[5, 2, 2, 2])[0]
        target = rng.choice(OP_TARGETS[op])
        kind = rng.choice(KINDS)
        mode = rng.choice(["default", "max_attempts=1", "none"])
        occurrence = rng.choice(["once", "once", "always", "random"])
        fields: dict[str, Any] = {}
        if occurrence == "once":
            nth = rng.choices([1, 2, 3], weights=[6, 3, 1])[0]
            fields.update(nth=min(nth, MAX_NTH.get(target, 3)), times=1)
        elif occurrence == "always":
            mode = "none"  # with retries on, a fault on every attempt costs seconds of backoff per call
            fields.update(nth=min(rng.randint(1, 2), MAX_NTH.get(target, 2)), times=None)
        else:
            fields.update(probability=rng.choice([0.3, 0.5]), seed=rng.randrange(1 << 30))
        action = kind
        if kind == "delay":
            action = f"delay={rng.choice([50, 300, 1200] if occurrence == 'once' else [50, 200])}"
        rules = [rule(target, action, **fields)]
        if target == "readback":  # a read-back happens when the create's answer is lost
            rules.insert(0, rule("snapshot_create", "drop_response"))
        where = f"#{fields['nth']}{'+' if occurrence == 'always' else ''}" if "nth" in fields \
            else f"p={fields['probability']}"
        setup = SETUPS.get((op, target))
        yield Trial(op, mode, rules, f"{op}: {target} {action} {where} [{mode}]", None, kind, target, setup)


def test_randomised_faults(s3_servers: dict[str, S3Server]) -> None:
    results = run_on_both(s3_servers, lambda bench: random_trials(
        random.Random(f"{SEED}-{bench.server.name}"), RANDOM_TRIALS), lanes=LANES)
    failed = report(f"randomised fault trials (seed {SEED})", results)
    assert not failed, "\n".join(failed)

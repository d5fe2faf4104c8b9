"""A real Dagster deployment for tests: ``dagster-webserver`` + ``dagster-daemon`` on 127.0.0.1.

Both load a workspace (the project's ``workspace.yaml`` unless told another) with a temporary
``DAGSTER_HOME`` (the project's ``dagster_home/dagster.yaml``, optionally with overrides) and a
temporary warehouse. Each process
starts in its own process group (the code servers and run workers they spawn join it), and
``stop`` signals the whole group, then kills what is left, so nothing outlives the test.

Everything waits on conditions with generous deadlines (a busy 2-core machine starts the
webserver, the daemon and the code servers they spawn in well over a minute), and a wait fails
at once, with the processes' logs, when one of them died.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import psutil
import yaml

from pipelines.code_location import REPO_ROOT, WAREHOUSE_ENV

TEMPLATE = REPO_ROOT / "dagster_home" / "dagster.yaml"
LOCATION = "paimon"
REPOSITORY = "__repository__"


@dataclass(frozen=True)
class CodeLocation:
    """A workspace file and the name of the one code location it loads."""

    workspace: Path
    name: str


PROJECT = CodeLocation(REPO_ROOT / "workspace.yaml", LOCATION)
FINISHED = {"SUCCESS", "FAILURE", "CANCELED"}
# Seconds to wait for the webserver, the code location and the daemon to come up.
START_TIMEOUT_S = 300.0
# One GraphQL request (the webserver answers slowly while the code location reloads).
REQUEST_TIMEOUT_S = 60.0
# Attempts of a GraphQL request that met a connection error or a timeout.
REQUEST_ATTEMPTS = 3


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LiveDagster:
    """A webserver and a daemon serving a code location (the project's) from a temp instance."""

    def __init__(self, root: Path, *, warehouse: str, env: Mapping[str, str] | None = None,
                 instance_overrides: Mapping[str, Any] | None = None, location: CodeLocation = PROJECT) -> None:
        self.root = root
        self.location = location
        self.home = root / "dagster_home"
        self.warehouse = warehouse
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = yaml.safe_load(TEMPLATE.read_text())
        config.update(instance_overrides or {})
        self.config = config
        self.env = {**os.environ, "DAGSTER_HOME": str(self.home), WAREHOUSE_ENV: warehouse, **(env or {})}
        self.processes: list[subprocess.Popen[bytes]] = []

    # ---- lifecycle ------------------------------------------------------------------------------

    def start(self, *, timeout: float = START_TIMEOUT_S) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "dagster.yaml").write_text(yaml.safe_dump(self.config))
        self._create_storage()
        for name in ("webserver", "daemon"):
            self._spawn(name, self._command(name))
        self.wait_ready(timeout)

    def _command(self, name: str) -> list[str]:
        bin_dir = Path(sys.executable).parent
        workspace = str(self.location.workspace)
        if name == "webserver":
            return [str(bin_dir / "dagster-webserver"), "-w", workspace, "-h", "127.0.0.1", "-p", str(self.port)]
        return [str(bin_dir / "dagster-daemon"), "run", "-w", workspace]

    def kill(self, name: str | None = None, *, group: bool = True) -> None:
        """SIGKILL the ``name`` process (``webserver`` or ``daemon``; None: both, a host crash),
        with its group (the code servers and run workers it started) unless ``group`` is false."""
        for process in list(self.processes):
            if name is not None and not process.args[0].endswith(f"dagster-{name}"):  # type: ignore[index]
                continue
            # Its descendants too: a code server may lead a session of its own.
            descendants = psutil.Process(process.pid).children(recursive=True) if group else []
            with contextlib.suppress(ProcessLookupError):
                if group:
                    os.killpg(process.pid, signal.SIGKILL)
                os.kill(process.pid, signal.SIGKILL)
            for child in descendants:
                with contextlib.suppress(psutil.NoSuchProcess):
                    child.kill()
            process.wait(timeout=10)
            self.processes.remove(process)

    def restart(self, name: str | None = None, *, timeout: float = START_TIMEOUT_S) -> None:
        """Start again what ``kill`` stopped (the same instance, warehouse and port)."""
        running = {Path(str(p.args[0])).name for p in self.processes}  # type: ignore[index]
        for each in ("webserver", "daemon") if name is None else (name,):
            if f"dagster-{each}" not in running:
                self._spawn(each, self._command(each))
        self.wait_ready(timeout)

    def _create_storage(self) -> None:
        """Create the instance's SQLite databases before two processes race to create them
        (seen: the daemon died on "table alembic_version already exists")."""
        instance = dg.DagsterInstance.from_config(str(self.home))
        try:
            instance.get_runs(limit=1)
            instance.all_instigator_state()
            instance.get_daemon_heartbeats()
        finally:
            instance.dispose()

    def _spawn(self, name: str, command: list[str]) -> None:
        log = (self.root / f"{name}.log").open("ab")  # a restart appends
        try:
            # A new session: the process leads its own group, so stop() reaches its children.
            self.processes.append(subprocess.Popen(command, cwd=REPO_ROOT, env=self.env, stdout=log,
                                                   stderr=subprocess.STDOUT, start_new_session=True))
        finally:
            log.close()

    def stop(self, *, grace: float = 20.0) -> None:
        """SIGTERM each process group, wait, then SIGKILL whatever is left (by group id)."""
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
        for process in self.processes:
            # The leader may be gone while children (code server, run worker) linger in its group.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
        self.processes.clear()

    def group_alive(self) -> bool:
        """Whether any process of the started groups is still alive."""
        for process in self.processes:
            try:
                os.killpg(process.pid, 0)
            except ProcessLookupError:
                continue
            return True
        return False

    def logs(self) -> str:
        return "\n".join(f"==== {path.name}\n{path.read_text(errors='replace')[-6000:]}"
                         for path in sorted(self.root.glob("*.log")))

    def check_alive(self) -> None:
        """Raise (with the logs) when the webserver or the daemon exited."""
        for process in self.processes:
            if process.poll() is not None:
                raise RuntimeError(f"{process.args[0]} exited with {process.returncode}\n{self.logs()}")

    def wait_ready(self, timeout: float) -> None:
        """Until the webserver answers, the code location is LOADED and the sensor daemon beats."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            with contextlib.suppress(OSError, urllib.error.URLError, ValueError, KeyError, TypeError):
                if self._location_loaded() and self._sensor_daemon_healthy():
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"dagster did not become ready in {timeout}s\n{self.logs()}")
            time.sleep(0.5)

    def _location_loaded(self) -> bool:
        data = self.graphql("{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus "
                            "locationOrLoadError { __typename } } } } }")
        entries = data["workspaceOrError"]["locationEntries"]
        return any(e["name"] == self.location.name and e["loadStatus"] == "LOADED"
                   and e["locationOrLoadError"]["__typename"] == "RepositoryLocation" for e in entries)

    def _sensor_daemon_healthy(self) -> bool:
        data = self.graphql("{ instance { daemonHealth { allDaemonStatuses { daemonType healthy } } } }")
        statuses = data["instance"]["daemonHealth"]["allDaemonStatuses"]
        return all(s["healthy"] for s in statuses if s["daemonType"] in ("SENSOR", "QUEUED_RUN_COORDINATOR",
                                                                           "BACKFILL"))

    # ---- GraphQL --------------------------------------------------------------------------------

    def graphql(self, query: str, variables: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The query's data; a connection error or timeout is retried a few times (the webserver
        of a busy machine sometimes answers late), GraphQL errors are raised at once."""
        body = json.dumps({"query": query, "variables": dict(variables or {})}).encode()
        for attempt in range(1, REQUEST_ATTEMPTS + 1):
            request = urllib.request.Request(f"{self.url}/graphql", data=body,
                                             headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                    payload = json.loads(response.read())
                break
            except (urllib.error.URLError, TimeoutError, ConnectionError):
                self.check_alive()
                if attempt == REQUEST_ATTEMPTS:
                    raise
        if payload.get("errors"):
            raise RuntimeError(f"GraphQL errors: {payload['errors']}")
        return dict(payload["data"])

    def launch_backfill(self, asset_paths: list[list[str]], partitions: list[str], *,
                        tags: Mapping[str, str], title: str) -> str:
        data = self.graphql("""
            mutation($params: LaunchBackfillParams!) {
              launchPartitionBackfill(backfillParams: $params) {
                __typename
                ... on LaunchBackfillSuccess { backfillId }
                ... on PythonError { message }
                ... on InvalidStepError { invalidStepKey }
                ... on UnauthorizedError { message }
              }
            }""", {"params": {
            "assetSelection": [{"path": path} for path in asset_paths],
            "partitionNames": partitions,
            "tags": [{"key": k, "value": v} for k, v in tags.items()],
            "title": title,
        }})
        result = data["launchPartitionBackfill"]
        if result["__typename"] != "LaunchBackfillSuccess":
            raise RuntimeError(f"backfill not launched: {result}")
        return str(result["backfillId"])

    def launch_run(self, job: str, *, run_config: Mapping[str, Any] | None = None,
                   tags: Mapping[str, str] | None = None) -> str:
        """Launch ``job`` as its launchpad does: with ``run_config`` (default: the job's own, the
        config the launchpad opens with); the run's id."""
        data = self.graphql("""
            mutation($params: ExecutionParams!) {
              launchRun(executionParams: $params) {
                __typename
                ... on LaunchRunSuccess { run { runId } }
                ... on PythonError { message }
                ... on RunConfigValidationInvalid { errors { message } }
              }
            }""", {"params": {
            "selector": {"repositoryLocationName": self.location.name, "repositoryName": "__repository__",
                         "jobName": job},
            "runConfigData": dict(run_config or {}),
            "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]},
        }})
        result = data["launchRun"]
        if result["__typename"] != "LaunchRunSuccess":
            raise RuntimeError(f"run of {job} not launched: {result}")
        return str(result["run"]["runId"])

    def backfill(self, backfill_id: str) -> dict[str, Any]:
        data = self.graphql("""
            query($id: String!) {
              partitionBackfillOrError(backfillId: $id) {
                __typename
                ... on PartitionBackfill { id status numPartitions }
                ... on PythonError { message }
              }
            }""", {"id": backfill_id})
        return dict(data["partitionBackfillOrError"])

    def runs(self, tags: Mapping[str, str] | None = None, *, job: str | None = None,
             limit: int = 200) -> list[dict[str, Any]]:
        """Runs (newest first) with their status, tags and timestamps."""
        run_filter: dict[str, Any] = {}
        if tags:
            run_filter["tags"] = [{"key": k, "value": v} for k, v in tags.items()]
        if job:
            run_filter["pipelineName"] = job
        data = self.graphql("""
            query($filter: RunsFilter, $limit: Int) {
              runsOrError(filter: $filter, limit: $limit) {
                __typename
                ... on Runs { results { runId jobName status creationTime startTime endTime
                                        tags { key value } assetSelection { path } } }
                ... on PythonError { message }
              }
            }""", {"filter": run_filter, "limit": limit})
        result = data["runsOrError"]
        if result["__typename"] != "Runs":
            raise RuntimeError(f"runs query failed: {result}")
        runs = list(result["results"])
        for run in runs:
            run["tags"] = {t["key"]: t["value"] for t in run["tags"]}
            run["assets"] = ["/".join(key["path"]) for key in run.pop("assetSelection") or []]
        return runs

    def sensor(self, name: str, *, ticks: int = 50) -> dict[str, Any]:
        data = self.graphql("""
            query($selector: SensorSelector!, $limit: Int) {
              sensorOrError(sensorSelector: $selector) {
                __typename
                ... on Sensor { name minIntervalSeconds
                  sensorState { status ticks(limit: $limit) { status timestamp runIds skipReason cursor
                                                              error { message } } } }
                ... on PythonError { message }
              }
            }""", {"selector": {"repositoryName": REPOSITORY, "repositoryLocationName": self.location.name,
                                "sensorName": name}, "limit": ticks})
        result = data["sensorOrError"]
        if result["__typename"] != "Sensor":
            raise RuntimeError(f"sensor query failed: {result}")
        return dict(result)

    def stop_sensor(self, name: str) -> None:
        """Stop a sensor, as its toggle in the UI does."""
        data = self.graphql("""
            query($selector: SensorSelector!) { sensorOrError(sensorSelector: $selector) { ... on Sensor { id } } }""",
            {"selector": {"repositoryName": REPOSITORY, "repositoryLocationName": self.location.name,
                          "sensorName": name}})
        result = self.graphql("""
            mutation($id: String) { stopSensor(id: $id) { __typename ... on PythonError { message } } }""",
            {"id": data["sensorOrError"]["id"]})["stopSensor"]
        if result["__typename"] != "StopSensorMutationResult":
            raise RuntimeError(f"sensor {name} not stopped: {result}")

    def wait(self, predicate: Any, *, timeout: float, interval: float = 1.0, what: str = "condition") -> Any:
        """``wait_for`` that fails at once when a process died, and shows the logs on a timeout."""

        def alive_predicate() -> Any:
            self.check_alive()
            return predicate()

        try:
            return wait_for(alive_predicate, timeout=timeout, interval=interval, what=what)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n{self.logs()}") from None

    def run_logs(self, run_id: str, *, limit: int = 500) -> list[str]:
        """The messages of a run's event log (for failure reports)."""
        data = self.graphql("""
            query($runId: ID!, $limit: Int) {
              logsForRun(runId: $runId, limit: $limit) {
                __typename
                ... on EventConnection { events { __typename ... on MessageEvent { message } } }
              }
            }""", {"runId": run_id, "limit": limit})
        events = data["logsForRun"].get("events", [])
        return [e.get("message", "") for e in events]


def overlaps(runs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Finished runs that started before an earlier-started one ended, each with that run (from the
    run records' start and end times)."""
    found, latest = [], None
    for run in sorted(runs, key=lambda r: r["startTime"]):
        if latest is not None and run["startTime"] < latest["endTime"]:
            found.append((latest["runId"], run["runId"]))
        if latest is None or run["endTime"] > latest["endTime"]:
            latest = run
    return found


@contextlib.contextmanager
def live_dagster(root: Path, *, warehouse: str, env: Mapping[str, str] | None = None,
                 instance_overrides: Mapping[str, Any] | None = None,
                 location: CodeLocation = PROJECT) -> Iterator[LiveDagster]:
    """Start the deployment, yield it, always stop it (also when starting failed half way)."""
    deployment = LiveDagster(root, warehouse=warehouse, env=env, instance_overrides=instance_overrides,
                             location=location)
    try:
        deployment.start()
        yield deployment
    finally:
        deployment.stop()


def wait_for(predicate: Any, *, timeout: float, interval: float = 1.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something truthy; that value is returned.

    The interval is only the polling pace: what is waited for is the condition, up to ``timeout``.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)

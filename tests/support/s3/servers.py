"""Real S3-compatible servers on 127.0.0.1 for the test suite: SeaweedFS and moto (locked).

``make test`` starts both once through ``tests/support/s3/with_servers.sh`` (which stops them by PID in
a trap) and passes their endpoints in ``PAIMON_TEST_S3_<NAME>``; a bare ``pytest`` run starts
them itself for the session (``tests/conftest.py``). Both hold the bucket :data:`BUCKET`; tests
use a fresh prefix in it.

CLI: ``python -m tests.support.s3.servers start STATE_DIR`` launches both in their own sessions, waits
until they answer and writes ``STATE_DIR/env`` (shell exports) and ``STATE_DIR/pids``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BUCKET = "paimon-tests"
ACCESS_KEY = "testing"
SECRET_KEY = "testing-secret"
REGION = "us-east-1"
ENV_PREFIX = "PAIMON_TEST_S3_"
NAMES = ("seaweed", "moto")
READY_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class S3Server:
    """One running server; ``pid`` is None when it was started by someone else (make test)."""

    name: str
    endpoint: str
    pid: int | None = None
    workdir: str | None = None

    def storage_options(self, endpoint: str | None = None) -> dict[str, Any]:
        """s3fs options reaching this server (or a proxy in front of it)."""
        return {"key": ACCESS_KEY, "secret": SECRET_KEY,
                "client_kwargs": {"endpoint_url": endpoint or self.endpoint, "region_name": REGION}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _free_port_pair() -> int:
    """A port whose gRPC twin (port + 10000, SeaweedFS's rule) is free too."""
    for _ in range(100):
        port = free_port()
        if port + 10000 < 65536:
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port + 10000))
                except OSError:
                    continue
            return port
    raise RuntimeError("no free loopback port pair")


def _credentials_env() -> dict[str, str]:
    return {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}


def _bin(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    if not path.exists():
        raise RuntimeError(f"{name} is not installed next to {sys.executable} (pip install -e '.[dev]')")
    return str(path)


def start_seaweed(log_dir: str) -> S3Server:
    """``weed mini`` bound to 127.0.0.1 only, telemetry and UIs off, every port chosen free."""
    workdir = tempfile.mkdtemp(prefix="seaweed-")
    s3, master, filer, volume, admin = (_free_port_pair() for _ in range(5))
    args = [_bin("weed"), "mini", f"-dir={workdir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            "-master.telemetry=false", "-webdav=false", "-admin.ui=false", f"-admin.port={admin}",
            f"-s3.port={s3}", f"-master.port={master}", f"-filer.port={filer}", f"-volume.port={volume}",
            "-s3.port.iceberg=0", "-s3.port.lance=0", "-metricsPort=0", f"-bucket={BUCKET}"]
    proc = _launch(args, f"{log_dir}/seaweed.log")
    return S3Server("seaweed", f"http://127.0.0.1:{s3}", proc.pid, workdir)


def start_moto(log_dir: str) -> S3Server:
    port = free_port()
    shim = str(Path(__file__).with_name("moto_locked.py"))
    proc = _launch([sys.executable, shim, "-H", "127.0.0.1", "-p", str(port)], f"{log_dir}/moto.log")
    return S3Server("moto", f"http://127.0.0.1:{port}", proc.pid)


def _launch(args: list[str], log_path: str) -> subprocess.Popen[bytes]:
    with open(log_path, "ab") as log:
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=_credentials_env(),
                                stdin=subprocess.DEVNULL, start_new_session=True)


def wait_ready(server: S3Server, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Until the server lists and holds :data:`BUCKET` (created here for moto)."""
    import boto3  # a test dependency only
    from botocore.config import Config

    client = boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id=ACCESS_KEY,
                          aws_secret_access_key=SECRET_KEY, region_name=REGION,
                          config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=5))
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            names = [b["Name"] for b in client.list_buckets().get("Buckets", [])]
            if BUCKET not in names:
                client.create_bucket(Bucket=BUCKET)
            client.put_object(Bucket=BUCKET, Key="ready-probe", Body=b"ok")
            client.delete_object(Bucket=BUCKET, Key="ready-probe")
            return
        except Exception as exc:  # any failure means "not yet"
            last = exc
            time.sleep(0.2)
    raise RuntimeError(f"S3 server {server.name} at {server.endpoint} not ready after {timeout_s}s: {last}")


def stop(server: S3Server) -> None:
    """SIGTERM the server's process group, SIGKILL it if it lingers; remove its data."""
    if server.pid is None:
        return
    try:
        os.killpg(server.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(server.pid):
        time.sleep(0.1)
    if _alive(server.pid):
        try:
            os.killpg(server.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if server.workdir:
        shutil.rmtree(server.workdir, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:  # not our child: probe it
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False


def start_all(log_dir: str) -> list[S3Server]:
    servers = [start_seaweed(log_dir), start_moto(log_dir)]
    try:
        for server in servers:
            wait_ready(server)
    except BaseException:
        for server in servers:
            stop(server)
        raise
    return servers


def from_env() -> dict[str, S3Server]:
    """Servers announced by ``with_servers.sh`` (empty when pytest runs on its own)."""
    found = {}
    for name in NAMES:
        endpoint = os.environ.get(f"{ENV_PREFIX}{name.upper()}")
        if endpoint:
            found[name] = S3Server(name, endpoint)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("command", choices=["start"])
    parser.add_argument("state_dir")
    args = parser.parse_args()
    servers = start_all(args.state_dir)
    state = Path(args.state_dir)
    (state / "pids").write_text(" ".join(str(s.pid) for s in servers) + "\n")
    (state / "workdirs").write_text("\n".join(s.workdir for s in servers if s.workdir) + "\n")
    exports = [f"export {ENV_PREFIX}{s.name.upper()}={s.endpoint}" for s in servers]
    (state / "env").write_text("\n".join(exports) + "\n")
    for server in servers:
        print(f"{server.name}: {server.endpoint} (pid {server.pid})")


if __name__ == "__main__":
    main()

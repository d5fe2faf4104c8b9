"""A PostgreSQL server for a benchmark run: this machine's binaries, a fresh data directory, a free
loopback port, stopped by its process id when the run ends.

Dagster's storage on PostgreSQL is what a deployment whose steps run on several hosts needs (every
step writes the run's events); the scale_out suite measures its executors on it as well as on the
SQLite default of one host.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

START_TIMEOUT_S = 60.0


def binaries() -> Path | None:
    """The directory holding ``initdb`` and ``postgres``, or None where PostgreSQL is not installed."""
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(versions[-1]).parent if versions else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _as_server_user(argv: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as the ``postgres`` user."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@contextmanager
def postgres_server() -> Iterator[str]:
    """A running server with an empty database ``dagster``; yields its SQLAlchemy URL. Its files
    live in a directory of their own under the system's temporary directory (as root, the server's
    user must reach them, which a directory inside another user's private tree would not allow),
    removed at the end."""
    import psycopg2

    bin_dir = binaries()
    if bin_dir is None:
        raise SystemExit("--instance postgres needs PostgreSQL's initdb and postgres (Debian: apt-get install "
                         "postgresql)")
    root = Path(tempfile.mkdtemp(prefix="bench-postgres-"))
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    if os.geteuid() == 0:
        for path in (root, sockets):
            shutil.chown(path, "postgres")
    server: subprocess.Popen[bytes] | None = None
    try:
        done = subprocess.run(_as_server_user([str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U",
                                               "postgres"]), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"initdb exited with {done.returncode}: {done.stderr[-2000:]}")
        port = _free_port()
        server = subprocess.Popen(_as_server_user([str(bin_dir / "postgres"), "-D", str(data), "-p", str(port),
                                                   "-k", str(sockets), "-c", "listen_addresses=127.0.0.1"]),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                connection = psycopg2.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres")
                break
            except psycopg2.OperationalError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute("CREATE DATABASE dagster")
        connection.close()
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/dagster"
    finally:
        if server is not None:
            _stop(server, data)
        shutil.rmtree(root, ignore_errors=True)


def _stop(server: subprocess.Popen[bytes], data: Path) -> None:
    """SIGINT, PostgreSQL's fast shutdown, to the server itself (its pid file), not to runuser in
    front of it; killed if it has not ended in 30 s."""
    pid_file = data / "postmaster.pid"
    pid = int(pid_file.read_text().split()[0]) if pid_file.exists() else server.pid
    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        pass
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()

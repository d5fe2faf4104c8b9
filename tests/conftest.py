"""Session-wide fixtures (the S3 servers, a warehouse parametrised by store kind) and the markers
that pick test tiers: ``s3`` (needs the S3 servers), ``interop`` (pypaimon, Java or Rust
oracles), ``torture`` (racing processes, fault trials), ``live`` (a real Dagster webserver and
daemon, or a browser), ``slow`` (long on their own). ``make check`` runs what has none of them.
"""

from __future__ import annotations

import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.s3 import servers as s3_servers_module
from tests.support.s3.servers import S3Server
from tests.support.s3.store import STORE_KINDS, Store

pytest_plugins = ["tests.cpu_report", "tests.support.dagster_runs"]

TESTS = Path(__file__).parent
# Markers every test below a directory carries.
DIRECTORY_MARKERS = {"interop": "interop", "torture": "torture", "ui": "live"}
S3_FIXTURES = {"s3_servers", "s3_store"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--read-shapes", choices=("quick", "deep"), default="quick",
                     help="depth of the read-shape matrix (tests/integration/test_read_shapes.py): quick in "
                          "make test, deep for hundreds of workloads per merge engine")


def pytest_configure(config: pytest.Config) -> None:
    """Restore SIGINT's default where the suite was started with it ignored (from a background
    job of a script): every process the tests start inherits the ignore, Dagster maps SIGTERM to
    SIGINT's handler, and its compute-log ``tail`` processes then ignore the SIGTERM that should
    end them, so each step run on a Dask worker waits out its cleanup timeouts."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark tests by where they live and what they use, so a new S3 test is marked ``s3`` by
    taking the fixture, not by remembering to."""
    for item in items:
        directory = Path(str(item.fspath)).relative_to(TESTS).parts[0]
        if directory in DIRECTORY_MARKERS:
            item.add_marker(DIRECTORY_MARKERS[directory])
        params = getattr(getattr(item, "callspec", None), "params", {})
        on_s3 = params.get("store", "local") != "local" or S3_FIXTURES & set(getattr(item, "fixturenames", ()))
        if on_s3:
            item.add_marker("s3")


@pytest.fixture
def read_shapes_depth(request: pytest.FixtureRequest) -> Any:
    """The read-shape matrix's depth (``--read-shapes``): a ``tests.read_shapes.checks.Depth``."""
    from tests.read_shapes.checks import DEPTHS

    return DEPTHS[request.config.getoption("--read-shapes")]


@pytest.fixture(scope="session")
def s3_servers() -> Iterator[dict[str, S3Server]]:
    """The servers ``make test`` started, or ones started (and stopped by PID) for this session."""
    announced = s3_servers_module.from_env()
    if len(announced) == len(s3_servers_module.NAMES):
        yield announced
        return
    log_dir = tempfile.mkdtemp(prefix="s3-servers-")
    started = s3_servers_module.start_all(log_dir)
    try:
        yield {s.name: s for s in started}
    finally:
        for server in started:
            s3_servers_module.stop(server)


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """A fresh warehouse on the local disk, on SeaweedFS and on moto."""
    if request.param == "local":
        return Store.local(str(tmp_path / "warehouse"))
    servers = request.getfixturevalue("s3_servers")
    return Store.on(servers[request.param])


@pytest.fixture(params=[k for k in STORE_KINDS if k != "local"])
def s3_store(request: pytest.FixtureRequest) -> Store:
    """A fresh warehouse on each S3 server."""
    return Store.on(request.getfixturevalue("s3_servers")[request.param])

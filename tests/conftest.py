"""Session-wide fixtures: the S3 servers and a warehouse parametrised by store kind."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.s3 import servers as s3_servers_module
from tests.s3.servers import S3Server
from tests.s3.store import STORE_KINDS, Store


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

"""A real Dask cluster for tests: worker processes on loopback that import this repository."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = str(Path(__file__).resolve().parents[2])


@contextlib.contextmanager
def loopback_cluster(workers: int = 2) -> Iterator[Any]:
    """A ``distributed.LocalCluster`` of ``workers`` single-threaded processes on 127.0.0.1, with the
    repository on the workers' ``PYTHONPATH`` (restored after); closed on exit."""
    import distributed

    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = REPO + (os.pathsep + previous if previous else "")
    try:
        with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                      dashboard_address="127.0.0.1:0", protocol="tcp") as cluster:
            yield cluster
    finally:
        if previous is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = previous

"""What every daily source shares: a synthetic/landing switch and a checked landing folder."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import dagster as dg
from pydantic import Field


class DailySource(dg.ConfigurableResource):
    """Base of the per-table source resources (``LogEventSource``, ``OrderEventSource``).

    Modes:
        ``synthetic``: rows generated per day from a generator seeded by the date, so re-running
            a day reproduces exactly the same rows.
        ``landing``: files dropped by an upstream system into ``landing_dir``. A day's files
            are either in a sub-folder named after the day (``<landing_dir>/2024-01-03/*``) or
            directly in ``landing_dir`` with the day in their name (``orders-2024-01-03.jsonl``).
            Parquet (``.parquet``, ``.pq``) and JSON lines (``.jsonl``, ``.ndjson``, ``.json``,
            optionally ``.gz``) are read; other files are ignored.

    Resources only hold configuration so they stay cheap to construct and can be swapped in
    tests; keeping them free of reading logic also keeps ``resources`` independent of
    ``pipelines``.
    """

    mode: Literal["synthetic", "landing"] = Field(
        default="synthetic",
        description="'synthetic' generates deterministic rows per day; 'landing' reads the day's "
        "Parquet/JSON-lines files from landing_dir.",
    )
    landing_dir: str = Field(
        default="",
        description="Landing folder (landing mode): <landing_dir>/<YYYY-MM-DD>/ sub-folders, or files "
        "whose name contains the date.",
    )

    def landing_path(self) -> Path:
        """The landing folder, checked to exist, so a misconfiguration fails before any write."""
        name = type(self).__name__
        if not self.landing_dir:
            raise dg.Failure(description=f"{name} is in 'landing' mode but landing_dir is empty",
                             allow_retries=False)
        path = Path(self.landing_dir).expanduser().resolve()
        if not path.is_dir():
            raise dg.Failure(description=f"landing folder {path} of {name} does not exist or is not a "
                             "directory", allow_retries=False)
        return path

"""Where raw log events come from: a deterministic generator or a landing folder of files."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import dagster as dg
from pydantic import Field


class LogEventSource(dg.ConfigurableResource):
    """Configuration of the log-event source; ``pipelines.log_events`` does the reading.

    Modes:
        ``synthetic``: ``rows_per_partition`` events per day from a generator seeded by the
            date, so re-running a day reproduces exactly the same rows.
        ``landing``: files dropped by an upstream system into ``landing_dir``. A day's files
            are either in a sub-folder named after the day (``<landing_dir>/2024-01-03/*``) or
            directly in ``landing_dir`` with the day in their name (``events-2024-01-03.jsonl``).
            Parquet (``.parquet``, ``.pq``) and JSON lines (``.jsonl``, ``.ndjson``, ``.json``,
            optionally ``.gz``) are read; other files are ignored. Columns are matched by name
            and cast to the table schema; ``dt`` always comes from the partition, not the file.

    The resource only holds configuration so that it stays cheap to construct and can be
    swapped in tests; keeping it free of reading logic also keeps ``resources`` independent
    of ``pipelines``.
    """

    mode: Literal["synthetic", "landing"] = Field(
        default="synthetic",
        description="'synthetic' generates deterministic events per day; 'landing' reads the day's "
        "Parquet/JSON-lines files from landing_dir.",
    )
    rows_per_partition: int = Field(
        default=20_000,
        ge=1,
        description="Events generated per daily partition in synthetic mode.",
    )
    landing_dir: str = Field(
        default="",
        description="Landing folder (landing mode): <landing_dir>/<YYYY-MM-DD>/ sub-folders, or files "
        "whose name contains the date.",
    )
    batch_size: int = Field(
        default=65_536,
        ge=1,
        description="Rows per record batch; bounds the memory used while reading or generating. "
        "In synthetic mode it is part of the seed layout, so changing it changes the rows.",
    )

    def landing_path(self) -> Path:
        """The landing folder, checked to exist, so a misconfiguration fails before any write."""
        if not self.landing_dir:
            raise dg.Failure(description="LogEventSource is in 'landing' mode but landing_dir is empty")
        path = Path(self.landing_dir).expanduser().resolve()
        if not path.is_dir():
            raise dg.Failure(description=f"landing folder {path} does not exist or is not a directory")
        return path

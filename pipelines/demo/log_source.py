"""Where raw log events come from: a deterministic generator or a landing folder of files."""

from __future__ import annotations

from pydantic import Field

from pipelines.demo.daily_source import DailySource


class LogEventSource(DailySource):
    """Configuration of the log-event source; ``pipelines.log_events`` does the reading.

    Modes (see ``DailySource``):
        ``synthetic``: ``rows_per_partition`` events per day from a generator seeded by the
            date.
        ``landing``: the day's Parquet/JSON-lines files in ``landing_dir``. Columns are matched
            by name and cast to the table schema; ``dt`` always comes from the partition, not
            the file.
    """

    rows_per_partition: int = Field(
        default=20_000,
        ge=1,
        description="Events generated per daily partition in synthetic mode.",
    )
    batch_size: int = Field(
        default=65_536,
        ge=1,
        description="Rows per record batch; bounds the memory used while reading or generating. "
        "In synthetic mode it is part of the seed layout, so changing it changes the rows.",
    )

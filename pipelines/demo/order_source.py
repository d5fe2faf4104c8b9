"""Where order change events (CDC) come from: a deterministic generator or a landing folder."""

from __future__ import annotations

from pydantic import Field

from pipelines.demo.daily_source import DailySource

# Order ids are YYYYMMDDnnnnnn: six digits per day for the running number.
MAX_ORDERS_PER_DAY = 999_999


class OrderEventSource(DailySource):
    """Configuration of the orders CDC source; ``pipelines.orders`` does the reading.

    Modes (see ``DailySource``):
        ``synthetic``: ``orders_per_partition`` orders created per day, each with its change
            events of that day (+I, then -U/+U pairs for corrections and status changes, and
            -D for cancellations), seeded by the date.
        ``landing``: the day's Parquet/JSON-lines CDC files in ``landing_dir``, each row a change
            with its kind in the ``op`` column (``+I``, ``-U``, ``+U``, ``-D``). A day's files
            hold the changes of the orders created that day; they are applied in file-name
            order and, inside a file, in row order, so the order of the rows is the order of
            the changes. A ``dt`` column, if present, must equal the day.
    """

    orders_per_partition: int = Field(
        default=2_000,
        ge=1,
        le=MAX_ORDERS_PER_DAY,
        description="Orders created per daily partition in synthetic mode (their change events "
        "are about 3.6 times as many rows).",
    )
    commit_every_rows: int = Field(
        default=1_500,
        ge=0,
        description="Changes per commit, like a streaming CDC sink committing at each checkpoint: "
        "a day of about 7,000 changes lands as 5 APPEND commits, each adding one level-0 file "
        "to every bucket it touches, which the compaction sensor then folds (shop.orders is "
        "write-only). 0 applies a whole day in one commit.",
    )
    batch_size: int = Field(
        default=65_536,
        ge=1,
        description="Rows per record batch handed to the writer; bounds the memory used while "
        "reading landing files (a synthetic day is generated whole, then sliced).",
    )

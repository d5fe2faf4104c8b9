"""Sorted runs spilled to local temporary files when a commit carries more than the buffer."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pyarrow as pa
from pyarrow import ipc

SPILL_CHUNK_ROWS = 65_536


class SpillFile:
    """One sorted run on local disk (Arrow IPC, zstd-compressed), read back chunk by chunk."""

    def __init__(self, table: pa.Table, *, directory: str | None = None) -> None:
        handle, self.path = tempfile.mkstemp(prefix="paimon-spill-", suffix=".arrow", dir=directory)
        os.close(handle)
        self.schema = table.schema
        self.rows = table.num_rows
        options = ipc.IpcWriteOptions(compression="zstd")
        with pa.OSFile(self.path, "wb") as sink, ipc.new_file(sink, table.schema, options=options) as writer:
            writer.write_table(table, max_chunksize=SPILL_CHUNK_ROWS)
        self.size = os.path.getsize(self.path)

    def chunks(self) -> Iterator[pa.Table]:
        """The run's rows in order, one record batch at a time (plain reads, not a memory map)."""
        with pa.OSFile(self.path, "rb") as source:
            reader = ipc.open_file(source)
            for index in range(reader.num_record_batches):
                yield pa.Table.from_batches([reader.get_batch(index)])

    def delete(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

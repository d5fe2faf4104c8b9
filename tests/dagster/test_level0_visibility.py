"""The row counts the Dagster layer reports for a write follow Java's batch-read rule: rows a
deletion-vector or first-row table still holds in level 0 are not counted until compaction."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import paimon_core as pc
from resources import keys, write_metadata

SCHEMA = pa.schema([pa.field("dt", pa.string(), nullable=False), pa.field("id", pa.int64(), nullable=False),
                    ("v", pa.string())])


@pytest.mark.parametrize("options", [{"deletion-vectors.enabled": "true"}, {"merge-engine": "first-row"}])
def test_partition_row_count_counts_rows_out_of_level0(tmp_path: Path, options: dict[str, str]) -> None:
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    table = catalog.create_table("db.t", schema=SCHEMA, primary_keys=["dt", "id"], partition_keys=["dt"],
                                 options={"bucket": "2", "write-only": "true", **options})
    data = pa.table({"dt": ["2024-01-01"] * 4, "id": [1, 2, 3, 4], "v": list("abcd")}, schema=SCHEMA)
    written = table.write(data)
    partition = {"dt": "2024-01-01"}
    before = write_metadata(table, snapshot_id=written, partition=partition, rows_written=4)
    assert before["dagster/partition_row_count"] == 0 and before[keys.INGEST_FILES] == 0  # all in level 0
    compacted = table.compact().snapshot_id
    after = write_metadata(table, snapshot_id=compacted, partition=partition, rows_written=0)
    assert after["dagster/partition_row_count"] == 4 and after[keys.INGEST_FILES] >= 1

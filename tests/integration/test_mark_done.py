"""Marking partitions done: ``_SUCCESS`` files beside the buckets, refreshed keeping their first
time, refused whole for a bad spec or a metastore action, untouched by reads and cleanup."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

import pyarrow as pa
import pytest

import paimon_core as paimon
from paimon_core.cli import main
from paimon_core.errors import OptionError, SchemaError
from paimon_core.maintenance.mark_done import SuccessFile, mark_partitions_done

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.date32()), ("hr", pa.int32())])
DAY = dt.date(2024, 1, 1)
DAY_DIR = "dt=19723"  # partition.legacy-name: a DATE directory holds its day number, as Java writes it


@pytest.fixture
def table(catalog: paimon.Catalog) -> paimon.Table:
    table = catalog.create_table("db.events", schema=SCHEMA, partition_keys=["dt", "hr"])
    table.write(pa.table({"id": [1, 2, 3], "dt": [DAY, DAY, None], "hr": [1, 2, 1]}, schema=SCHEMA))
    return table


def success(table: paimon.Table, partition_path: str) -> dict[str, int] | None:
    path = Path(table.path) / partition_path / "_SUCCESS"
    return json.loads(path.read_text()) if path.is_file() else None


def test_marks_write_success_files_next_to_the_partition_data(table: paimon.Table) -> None:
    before = int(time.time() * 1000)
    done = table.mark_partitions_done([{"dt": DAY, "hr": 1}, "dt=2024-01-01/hr=2", {"dt": "2024-01-01"}])
    assert done.partitions == (f"{DAY_DIR}/hr=1", f"{DAY_DIR}/hr=2", DAY_DIR)
    for path, marked in zip(done.partitions, done.files):
        assert success(table, path) == {"creationTime": marked.creation_time,
                                        "modificationTime": marked.modification_time}
        assert before <= marked.creation_time == marked.modification_time <= int(time.time() * 1000)
        assert (Path(table.path) / path).is_dir()
    assert (Path(table.path) / DAY_DIR / "hr=1" / "bucket-0").is_dir()  # the data directory it sits beside
    assert table.success_file({"dt": DAY, "hr": 1}) == done.files[0]
    assert table.success_file({"dt": DAY, "hr": 3}) is None
    # a null partition value is the default partition's directory, and an hour without data can be done
    nulls = table.mark_partitions_done([{"dt": None, "hr": 1}, {"dt": DAY, "hr": 23}])
    assert nulls.partitions == ("dt=__DEFAULT_PARTITION__/hr=1", f"{DAY_DIR}/hr=23")
    assert table.read().num_rows == 3


def test_a_second_mark_keeps_the_first_time(table: paimon.Table) -> None:
    first = mark_partitions_done(table.context(), [{"dt": DAY, "hr": 1}], now_ms=1_000).files[0]
    again = mark_partitions_done(table.context(), [{"dt": DAY, "hr": 1}], now_ms=5_000).files[0]
    assert first == SuccessFile(1_000, 1_000) and again == SuccessFile(1_000, 5_000)
    assert success(table, f"{DAY_DIR}/hr=1") == {"creationTime": 1_000, "modificationTime": 5_000}


@pytest.mark.parametrize(("spec", "message"), [
    ({"hr": 1}, "leading run of the partition keys"),
    ({"region": "eu"}, "not partition keys"),
    ({"dt": "yesterday"}, "does not fit partition column 'dt'"),
])
def test_a_bad_spec_marks_nothing(table: paimon.Table, spec: dict[str, object], message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        table.mark_partitions_done([{"dt": DAY, "hr": 1}, spec])
    assert success(table, f"{DAY_DIR}/hr=1") is None


def test_metastore_actions_are_refused_before_anything_is_written(catalog: paimon.Catalog) -> None:
    table = catalog.create_table("db.hive", schema=SCHEMA, partition_keys=["dt", "hr"],
                                 options={"partition.mark-done-action": "success-file,done-partition"})
    with pytest.raises(OptionError, match=r"\['done-partition'\].*metastore"):
        table.mark_partitions_done({"dt": DAY, "hr": 1})
    assert success(table, f"{DAY_DIR}/hr=1") is None
    unpartitioned = catalog.create_table("db.flat", schema=SCHEMA)
    with pytest.raises(SchemaError, match="not partitioned"):
        unpartitioned.mark_partitions_done({"dt": DAY})


def test_orphan_cleanup_expiry_and_compaction_leave_success_files(table: paimon.Table) -> None:
    done = table.mark_partitions_done([{"dt": DAY, "hr": 1}, {"dt": DAY}])
    table.write(pa.table({"id": [4], "dt": [DAY], "hr": [1]}, schema=SCHEMA))
    table.compact(full=True)
    table.expire_snapshots(dry_run=False, older_than=dt.datetime.now() + dt.timedelta(days=1))
    stray = Path(table.path) / DAY_DIR / "hr=1" / "bucket-0" / "data-stray.parquet"
    stray.write_bytes(b"left by a dead writer")
    cleaned = table.remove_orphan_files(older_than=int(time.time() * 1000) + 60_000, dry_run=False, force=True)
    assert [Path(p).name for p in cleaned.orphans] == ["data-stray.parquet"] and not stray.exists()
    for path in done.partitions:
        assert success(table, path) is not None
    assert sorted(table.read().column("id").to_pylist()) == [1, 2, 3, 4]


def test_cli_marks_and_lists(catalog: paimon.Catalog, table: paimon.Table, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["mark-partition-done", "db.events", "--partition", "dt=2024-01-01,hr=1", "--partition",
                 "dt=2024-01-02", "--warehouse", catalog.warehouse, "--format", "json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0 and [r["partition"] for r in rows] == [f"{DAY_DIR}/hr=1", "dt=19724"]
    assert rows[0]["first marked"].endswith("Z")
    code = main(["mark-partition-done", "db.events", "--partition", "hr=1", "--warehouse", catalog.warehouse])
    assert code == 1 and "leading run" in capsys.readouterr().err

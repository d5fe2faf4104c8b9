"""The ``paimon`` command as an operator runs it: destructive commands are dry runs or ask first,
listings in three formats, time travel and filters on read, DDL, partition drops, rollback to a time.

Commands run as subprocesses of the installed ``paimon`` script where a terminal or the exit
status matters, else through :func:`paimon_core.cli.main` in-process."""

from __future__ import annotations

import csv
import io
import json
import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

import paimon_core as paimon
from paimon_core.cli import main
from tests.integration.test_bad_input_catalogue import tree_digest

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])
PAIMON = str(Path(sys.executable).with_name("paimon"))


@pytest.fixture
def table(catalog: paimon.Catalog) -> paimon.Table:
    """Four commits over three partitions, a tag on snapshot 2; write-only so nothing expires."""
    table = catalog.create_table("db.t", schema=SCHEMA, primary_keys=["dt", "id"], partition_keys=["dt"],
                                 options={"bucket": "2", "write-only": "true", "snapshot.num-retained.min": "1"})
    table.write(pa.table({"dt": ["d1", "d1", "d2"], "id": [1, 2, 3], "v": ["a", "b", "c"]}, schema=SCHEMA))
    table.write(pa.table({"dt": ["d1"], "id": [1], "v": ["a2"]}, schema=SCHEMA))
    table.create_tag("two")
    table.write(pa.table({"dt": ["d3"], "id": [4], "v": ["d"]}, schema=SCHEMA))
    table.write(pa.table({"dt": ["d2"], "id": [5], "v": ["e"]}, schema=SCHEMA))
    return table


def paimon_cli(warehouse: str, *args: str, stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PAIMON, *args, "--warehouse", warehouse], stdin=stdin, capture_output=True, text=True,
                          timeout=120, check=False)


def run(capsys: pytest.CaptureFixture[str], warehouse: str, *args: str) -> tuple[int, str, str]:
    code = main(["--warehouse", warehouse, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---- destructive commands never act by default --------------------------------------------------------


def test_expiry_is_a_dry_run_listing_files_with_sizes_until_execute(
        catalog: paimon.Catalog, table: paimon.Table, capsys: pytest.CaptureFixture[str]) -> None:
    table.delete_tag("two")
    table.compact(full=True)  # d1's two level-0 files are merged: the old ones only old snapshots reference
    before = tree_digest(catalog.warehouse_path)
    code, out, _ = run(capsys, catalog.warehouse, "expire-snapshots", "db.t", "--older-than", "now",
                       "--retain-max", "1", "--format", "json")
    assert code == 0 and tree_digest(catalog.warehouse_path) == before
    listed = json.loads(out)
    plan = table.expire_snapshots(older_than=int(time.time() * 1000), retain_max=1)
    assert {r["path"] for r in listed if r["file"] == "data"} == set(plan.data_files) != set()
    sizes = {r["path"]: r["size"] for r in listed if r["file"] == "data"}
    assert sizes == {p: os.path.getsize(p) for p in plan.data_files}
    code, out, _ = run(capsys, catalog.warehouse, "expire-snapshots", "db.t", "--older-than", "now",
                       "--retain-max", "1")
    assert "dry run: nothing was deleted; pass --execute" in out and "KiB" in out
    code, out, _ = run(capsys, catalog.warehouse, "expire-snapshots", "db.t", "--older-than", "now",
                       "--retain-max", "1", "--execute")
    assert code == 0 and "expired snapshots 1..4" in out
    assert [s.id for s in table.snapshots()] == [5] and not any(os.path.exists(p) for p in plan.data_files)
    assert table.read().num_rows == 5


def test_orphan_cleanup_is_a_dry_run_and_names_the_force_flag(
        catalog: paimon.Catalog, table: paimon.Table, capsys: pytest.CaptureFixture[str]) -> None:
    stray = Path(table.path) / "dt=d1" / "bucket-0" / "data-stray.parquet"
    stray.write_bytes(b"x" * 3000)
    before = tree_digest(catalog.warehouse_path)
    code, _, err = run(capsys, catalog.warehouse, "remove-orphan-files", "db.t", "--older-than", "now")
    assert code == 1 and "--force" in err and "force=True" not in err and "--older-than" in err
    code, out, _ = run(capsys, catalog.warehouse, "remove-orphan-files", "db.t", "--older-than", "now",
                       "--force", "--format", "csv")
    assert code == 0 and tree_digest(catalog.warehouse_path) == before
    assert list(csv.reader(io.StringIO(out))) == [["size", "path"], ["3000", str(stray)]]
    code, out, _ = run(capsys, catalog.warehouse, "remove-orphan-files", "db.t", "--older-than", "now",
                       "--force", "--execute")
    assert code == 0 and "deleted 1 orphan files" in out and not stray.exists()
    assert table.read().num_rows == 5


@pytest.mark.parametrize("args", [
    ["rollback", "db.t", "--snapshot", "2"],
    ["delete-tag", "db.t", "two"],
    ["drop-partition", "db.t", "--partition", "dt=d1"],
])
def test_changes_need_yes_without_a_terminal(catalog: paimon.Catalog, table: paimon.Table, args: list[str]) -> None:
    before = tree_digest(catalog.warehouse_path)
    result = paimon_cli(catalog.warehouse, *args)
    assert result.returncode == 1 and "pass --yes" in result.stderr and "nothing was changed" in result.stderr
    assert tree_digest(catalog.warehouse_path) == before
    assert result.stdout  # what would change was shown
    done = paimon_cli(catalog.warehouse, *args, "--yes")
    assert done.returncode == 0, done.stderr
    assert tree_digest(catalog.warehouse_path) != before


def test_rollback_shows_the_plan_and_asks_at_a_terminal(catalog: paimon.Catalog, table: paimon.Table) -> None:
    def answer(text: bytes) -> tuple[int, str]:
        leader, follower = pty.openpty()
        try:
            process = subprocess.Popen([PAIMON, "rollback", "db.t", "--snapshot", "2", "--warehouse",
                                        catalog.warehouse], stdin=follower, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE)
            os.write(leader, text)
            out, err = process.communicate(timeout=120)
        finally:
            os.close(leader)
            os.close(follower)
        return process.returncode, (out + err).decode()

    code, shown = answer(b"n\n")
    assert code == 1 and "would remove snapshots [3, 4]" in shown and "[y/N]" in shown
    assert table.latest_snapshot().id == 4
    code, shown = answer(b"y\n")
    assert code == 0 and "rolled back to snapshot 2" in shown
    assert table.latest_snapshot().id == 2


def test_rollback_to_a_time(catalog: paimon.Catalog, table: paimon.Table, capsys: pytest.CaptureFixture[str]) -> None:
    second = table.snapshot(2).time_millis
    code, out, _ = run(capsys, catalog.warehouse, "rollback", "db.t", "--to-timestamp", str(second), "--yes")
    assert code == 0 and "rolled back to snapshot 2" in out
    code, _, err = run(capsys, catalog.warehouse, "rollback", "db.t", "--to-timestamp", "2000-01-01", "--yes")
    assert code == 1 and "no snapshot at or before" in err and "2000-01-01 00:00:00 UTC" in err
    code, _, err = run(capsys, catalog.warehouse, "rollback", "db.t", "--to-timestamp", "soon", "--yes")
    assert code == 1 and "--to-timestamp" in err and "'soon'" in err


def test_drop_partition_is_an_overwrite_snapshot(catalog: paimon.Catalog, table: paimon.Table,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, catalog.warehouse, "drop-partition", "db.t", "--partition", "dt=d1",
                       "--partition", "dt=d3", "--yes")
    assert code == 0 and "dropped 2 partitions" in out
    assert table.latest_snapshot().commit_kind == "OVERWRITE"
    assert sorted(table.read().column("dt").to_pylist()) == ["d2", "d2"]
    assert table.read(snapshot_id=4).num_rows == 5  # time travel still sees them
    code, _, err = run(capsys, catalog.warehouse, "drop-partition", "db.t", "--partition", "dt=d9", "--yes")
    assert code == 1 and "'dt': 'd9'" in err and "nothing was dropped" in err
    code, _, err = run(capsys, catalog.warehouse, "drop-partition", "db.t", "--partition", "id=1", "--yes")
    assert code == 1 and "not partition keys" in err


# ---- listings, formats and flags --------------------------------------------------------------------------


def test_warehouse_before_or_after_the_command_or_from_the_environment(
        catalog: paimon.Catalog, table: paimon.Table, tmp_path: Path) -> None:
    after = paimon_cli(catalog.warehouse, "tables", "--format", "json")
    before = subprocess.run([PAIMON, "--warehouse", catalog.warehouse, "--format", "json", "tables"],
                            capture_output=True, text=True, timeout=120, check=False)
    env = subprocess.run([PAIMON, "tables", "--format", "json"], capture_output=True, text=True, timeout=120,
                         check=False, env={**os.environ, "PAIMON_WAREHOUSE": catalog.warehouse})
    assert after.stdout == before.stdout == env.stdout and after.returncode == 0
    assert json.loads(after.stdout)[0]["table"] == "db.t"
    missing = paimon_cli(str(tmp_path / "no-such-warehouse"), "tables")
    assert missing.returncode == 1 and "no-such-warehouse does not exist" in missing.stderr
    assert "--warehouse" in missing.stderr


def test_tables_counts_rows_of_primary_key_tables_only_when_asked(
        catalog: paimon.Catalog, table: paimon.Table, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, catalog.warehouse, "tables", "--format", "json")
    [listed] = json.loads(out)
    assert listed["records"] == 6 and listed["rows"] is None and listed["kind"] == "primary key"
    _, out, _ = run(capsys, catalog.warehouse, "tables", "--count", "--format", "json")
    assert json.loads(out)[0]["rows"] == 5


def test_snapshots_files_and_tags_in_every_format(catalog: paimon.Catalog, table: paimon.Table,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, catalog.warehouse, "snapshots", "db.t", "--format", "json")
    snapshots = json.loads(out)
    assert [s["id"] for s in snapshots] == [1, 2, 3, 4] and snapshots[0]["committed"].endswith("Z")
    _, out, _ = run(capsys, catalog.warehouse, "snapshots", "db.t")
    assert " UTC" in out.splitlines()[2]
    _, out, _ = run(capsys, catalog.warehouse, "files", "db.t", "--tag", "two", "--format", "csv")
    files = list(csv.DictReader(io.StringIO(out)))
    assert sorted(f["file"] for f in files) == sorted(f.file_name for f in table.files(2))
    assert all(int(f["size"]) > 0 for f in files)
    _, out, _ = run(capsys, catalog.warehouse, "tags", "db.t", "--format", "json")
    assert [(t["tag"], t["snapshot"]) for t in json.loads(out)] == [("two", 2)]


def test_read_with_filter_columns_time_travel_and_limit(catalog: paimon.Catalog, table: paimon.Table,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    def rows(*args: str) -> list[dict[str, object]]:
        code, out, err = run(capsys, catalog.warehouse, "read", "db.t", "--format", "json", *args)
        assert code == 0, err
        return sorted(json.loads(out), key=lambda r: (str(r.get("dt")), str(r.get("id"))))

    assert rows("--filter", "dt = 'd1' AND id >= 1") == [{"dt": "d1", "id": 1, "v": "a2"},
                                                         {"dt": "d1", "id": 2, "v": "b"}]
    assert rows("--filter", "id = 3 OR v IN ('d', 'e')", "--columns", "id") == [{"id": 3}, {"id": 4}, {"id": 5}]
    assert rows("--filter", '[["id", "<", 2]]', "--tag", "two") == [{"dt": "d1", "id": 1, "v": "a2"}]
    assert rows("--snapshot", "1", "--filter", "id = 1") == [{"dt": "d1", "id": 1, "v": "a"}]
    third = table.snapshot(3).time_millis
    assert len(rows("--timestamp", str(third))) == 4
    assert len(rows("--limit", "2")) == 2
    code, _, err = run(capsys, catalog.warehouse, "read", "db.t", "--filter", "nope = 1")
    assert code == 1 and "'nope'" in err
    code, _, err = run(capsys, catalog.warehouse, "read", "db.t", "--filter", "id ~ 1")
    assert code == 1 and "--filter" in err


def test_read_a_system_table(catalog: paimon.Catalog, table: paimon.Table, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, catalog.warehouse, "read", "db.t$snapshots", "--format", "json")
    assert code == 0, err
    assert [r["snapshot_id"] for r in json.loads(out)] == [1, 2, 3, 4]
    code, out, err = run(capsys, catalog.warehouse, "read", "db.t$snapshots", "--format", "json",
                         "--filter", "snapshot_id > 2", "--columns", "snapshot_id,commit_kind")
    assert code == 0, err
    assert json.loads(out) == [{"snapshot_id": 3, "commit_kind": "APPEND"}, {"snapshot_id": 4, "commit_kind": "APPEND"}]
    code, _, err = run(capsys, catalog.warehouse, "read", "db.t$nope")
    assert code == 1 and "'nope'" in err and "snapshots" in err


def test_a_limited_audit_log_read_stops_at_the_rows_it_shows(catalog: paimon.Catalog,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """``--limit`` on ``$audit_log`` reads the first sections only: with the files of the last
    bucket gone, the limited read still answers and a full read fails."""
    wide = catalog.create_table("db.wide", schema=SCHEMA, primary_keys=["id"], options={"bucket": "16"})
    wide.write(pa.table({"dt": ["d"] * 400, "id": list(range(400)), "v": ["x"] * 400}, schema=SCHEMA))
    wide.delete(pa.table({"id": [0, 1, 2]}))
    last = wide.plan()[-1]
    for meta in last.files:
        (Path(wide.path) / f"bucket-{last.bucket}" / meta.file_name).unlink()
    code, out, err = run(capsys, catalog.warehouse, "read", "db.wide$audit_log", "--limit", "3", "--format", "json",
                         "--columns", "rowkind,id", "--filter", "rowkind = '+I'")
    assert code == 0, err
    rows = json.loads(out)
    assert len(rows) == 3 and {r["rowkind"] for r in rows} == {"+I"}
    with pytest.raises(FileNotFoundError):
        wide.system("audit_log")


# ---- DDL ------------------------------------------------------------------------------------------------


def test_create_database_table_and_alter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    warehouse = str(tmp_path / "new-warehouse")
    code, out, err = run(capsys, warehouse, "create-database", "shop")
    assert code == 0, err
    code, out, err = run(capsys, warehouse, "create-table", "shop.orders", "--column", "dt STRING NOT NULL",
                         "--column", "id BIGINT NOT NULL", "--column", "amount DECIMAL(12, 2)",
                         "--primary-key", "dt,id", "--partition-key", "dt", "--option", "bucket=4",
                         "--comment", "orders")
    assert code == 0, err
    assert "DECIMAL(12, 2)" in out and "bucket = 4" in out
    table = paimon.Catalog(warehouse).get_table("shop.orders")
    assert list(table.schema.primary_keys) == ["dt", "id"] and table.options.bucket == 4
    code, out, err = run(capsys, warehouse, "alter", "shop.orders", "--add-column", "note STRING",
                         "--set", "snapshot.num-retained.min=3", "--rename-column", "amount=total")
    assert code == 0, err
    schema = paimon.Catalog(warehouse).get_table("shop.orders").schema
    assert schema.field_names == ["dt", "id", "total", "note"] and schema.options["snapshot.num-retained.min"] == "3"
    before = tree_digest(warehouse)
    code, _, err = run(capsys, warehouse, "create-table", "shop.bad", "--column", "id BIGNT")
    assert code == 1 and "BIGNT" in err
    code, _, err = run(capsys, warehouse, "create-table", "shop.bad", "--column", "id")
    assert code == 1 and "--column" in err and "name TYPE" in err
    code, _, err = run(capsys, warehouse, "alter", "shop.orders")
    assert code == 1 and "nothing to change" in err
    assert tree_digest(warehouse) == before

"""The filesystem catalog's directory layout and the ``paimon`` command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import paimon_core as pc
from paimon_core.cli import main
from paimon_core.errors import DatabaseExistsError, DatabaseNotEmptyError
from tests.integration.conftest import EVENTS, events


def test_layout_and_listing(tmp_path: Path) -> None:
    catalog = pc.Catalog(str(tmp_path / "wh"))
    catalog.create_database("logs")
    catalog.create_database("logs", exist_ok=True)
    with pytest.raises(DatabaseExistsError):
        catalog.create_database("logs")
    table = catalog.create_table("logs.events", schema=EVENTS, partition_keys=["dt"])
    table.write(events(range(3)))
    assert (tmp_path / "wh" / "logs.db" / "events" / "schema" / "schema-0").is_file()
    assert (tmp_path / "wh" / "logs.db" / "events" / "snapshot" / "LATEST").read_text() == "1"
    assert (tmp_path / "wh" / "logs.db" / "events" / "snapshot" / "EARLIEST").read_text() == "1"
    table.write(events(range(3, 4)))
    assert (tmp_path / "wh" / "logs.db" / "events" / "snapshot" / "LATEST").read_text() == "2"
    assert (tmp_path / "wh" / "logs.db" / "events" / "snapshot" / "EARLIEST").read_text() == "1"
    assert (tmp_path / "wh" / "logs.db" / "events" / "dt=2024-01-01" / "bucket-0").is_dir()
    (tmp_path / "wh" / "logs.db" / ".staging").mkdir()
    assert catalog.list_databases() == ["logs"] and catalog.list_tables("logs") == ["events"]
    with pytest.raises(DatabaseNotEmptyError):
        catalog.drop_database("logs")
    catalog.drop_table("logs.events")
    assert catalog.list_tables("logs") == []
    catalog.drop_table("logs.events", ignore_missing=True)
    catalog.drop_database("logs")
    assert catalog.list_databases() == []


def test_relative_and_uri_warehouses_are_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    pc.Catalog("wh").create_database("db")
    assert pc.Catalog(f"file://{tmp_path}/wh").list_databases() == ["db"]
    assert pc.Catalog("wh").warehouse == f"file://{tmp_path}/wh"


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    catalog = pc.Catalog(str(tmp_path / "wh"))
    catalog.create_database("logs")
    table = catalog.create_table("logs.events", schema=EVENTS, partition_keys=["dt"])
    table.write(events(range(3)))
    table.write(events(range(3, 5), "2024-01-02"))
    return str(tmp_path / "wh")


def test_cli_commands(warehouse: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--warehouse", warehouse, "tables"]) == 0
    out = capsys.readouterr().out
    assert "logs.events" in out and "dt" in out and " 5" in out
    assert main(["--warehouse", warehouse, "snapshots", "logs.events"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["id", "kind"] and len(lines) == 4 and "APPEND" in lines[2]
    assert main(["--warehouse", warehouse, "files", "logs.events"]) == 0
    out = capsys.readouterr().out
    assert "dt=2024-01-01" in out and "dt=2024-01-02" in out and ".parquet" in out
    assert main(["--warehouse", warehouse, "read", "logs.events", "--limit", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["id", "msg", "dt"] and len(out) == 4
    assert main(["--warehouse", warehouse, "read", "logs.nope"]) == 1
    assert "logs.nope" in capsys.readouterr().err


def test_console_script_is_installed(warehouse: str) -> None:
    script = Path(sys.executable).with_name("paimon")
    result = subprocess.run([str(script), "--warehouse", warehouse, "snapshots", "logs.events"],
                            capture_output=True, text=True, check=True)
    assert "APPEND" in result.stdout

"""Shared helpers for integration tests on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

import paimon_core as pc

EVENTS = pa.schema([("id", pa.int64()), ("msg", pa.string()), ("dt", pa.string())])


def events(ids: range | list[int], dt: str = "2024-01-01") -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "msg": [f"m{i}" for i in ids], "dt": [dt] * len(ids)}, schema=EVENTS)


def merged_view(table: pc.Table) -> pa.Table:
    """Every level merged, level 0 included: the initial batch of a latest-full stream. Batch
    reads of first-row and deletion-vector tables leave level 0 out (Java's rule)."""
    [initial] = list(table.stream("latest-full", until_latest=True, poll_interval_s=0))[:1]
    return initial.data.drop_columns([pc.ROW_KIND])


def files_under(root: Path) -> set[str]:
    """Every regular file below ``root`` (relative paths)."""
    out = set()
    for folder, _, names in os.walk(root):
        for name in names:
            out.add(os.path.relpath(os.path.join(folder, name), root))
    return out


def reopened(table: pc.Table) -> pc.Table:
    """``table`` as another process opens it: nothing it read is cached (a file damaged or
    removed behind the first process's back is what this one sees)."""
    return pc.Catalog(table.file_io.uri(table.path).rsplit("/", 2)[0]).get_table(table.name)


@pytest.fixture
def catalog(tmp_path: Path) -> pc.Catalog:
    catalog = pc.Catalog(str(tmp_path / "warehouse"))
    catalog.create_database("db")
    return catalog

"""Dagster's private symbols the integration uses are where ``pipelines.dagster_internals`` says.

A Dagster upgrade that moves one, or changes the parameters its callers pass, fails here (in
``make check``) rather than in a run.
"""

from __future__ import annotations

import importlib
import inspect
import pathlib
import re

import dagster as dg
import pytest

from pipelines.dagster_internals import CHECKED_WITH, INTERNALS, execute_step_body

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("internal", INTERNALS, ids=lambda i: f"{i.module}.{i.name}")
def test_each_internal_symbol_is_where_and_as_it_was_checked(internal) -> None:  # type: ignore[no-untyped-def]
    symbol = getattr(importlib.import_module(internal.module), internal.name)
    assert internal.why and internal.public_alternative
    if internal.parameters is not None:
        assert tuple(inspect.signature(symbol).parameters) == internal.parameters, (
            f"{internal.module}.{internal.name} changed its signature since Dagster {CHECKED_WITH}")


def test_the_internals_were_checked_with_the_pinned_dagster() -> None:
    pinned = re.search(r'"dagster==([0-9.]+)"', (ROOT / "pyproject.toml").read_text())
    assert pinned is not None and pinned.group(1) == CHECKED_WITH == dg.__version__


def test_the_in_process_step_body_is_found() -> None:
    assert execute_step_body() is not None


def test_no_module_but_the_quarantine_imports_dagster_internals() -> None:
    offenders = []
    for path in sorted((ROOT / "pipelines").rglob("*.py")) + sorted((ROOT / "resources").rglob("*.py")):
        if path.name == "dagster_internals.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.match(r"\s*(from|import)\s+dagster\._", line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "import these through pipelines.dagster_internals:\n" + "\n".join(offenders)


def test_every_symbol_the_quarantine_imports_is_listed_with_its_reason() -> None:
    import ast

    source = (ROOT / "pipelines" / "dagster_internals.py").read_text()
    imported = {(node.module, alias.name) for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dagster._")
                for alias in node.names}
    listed = {(internal.module, internal.name) for internal in INTERNALS}
    assert imported and imported <= listed

"""Definition names and ``paimon/…`` keys are spelled in ``pipelines/names.py`` and
``resources/keys.py`` only: the builders, the demo, the tests and the benchmarks call them.

Docstrings and comments may name them (they explain), as may the README and YAML examples; a
string the code uses may not, so renaming one in its module renames it everywhere.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OWNERS = {ROOT / "pipelines" / "names.py", ROOT / "resources" / "keys.py"}
SPELLED = re.compile(
    r"paimon/[a-z]"  # a tag, metadata key or prefix
    r"|paimon-write/"  # a pool
    r"|\b(?:ingest|land|changes|compact|full_compact)_\w*_(?:job|sensor|schedule)\b"  # a table's job, schedule, sensor
    r"|\b(?:expire_snapshots|remove_orphan_files)_[a-z]\w*"  # a maintenance schedule
    r"|^(?:partition_valid|level0_below_stop_trigger|snapshots_within_retention|no_orphan_files)$"
    r"|^dagster\.(?:run_id|asset_key|write_mode|partition)$")  # a snapshot property


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def texts(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Every string the code uses, an f-string with ``x`` for each placeholder; no docstrings."""
    skipped = docstrings(tree)
    inside = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            yield node.lineno, "".join(part.value if isinstance(part, ast.Constant) else "x" for part in node.values)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped
              and id(node) not in inside):
            yield node.lineno, node.value


def spellings(path: Path) -> Iterator[str]:
    for line, text in texts(ast.parse(path.read_text())):
        if SPELLED.search(text):
            yield f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{line}: {text!r}"


def test_no_code_spells_a_definition_name_or_key_outside_their_modules() -> None:
    files = [p for folder in ("pipelines", "resources", "tests", "benchmarks") for p in (ROOT / folder).rglob("*.py")
             if p not in OWNERS and p != Path(__file__)]
    found = [line for path in sorted(files) for line in spellings(path)]
    assert not found, "use pipelines.names / resources.keys:\n" + "\n".join(found)


def test_the_check_sees_a_spelled_name_and_not_a_docstring(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('"""Writes paimon/ingest/rows_written."""\nTAG = "paimon/table"\nJOB = f"ingest_{x}_job"\n'
                      'CHECK = "no_orphan_files"\nTEXT = "no orphan files"\n')
    assert [line.split(": ", 1)[1] for line in spellings(sample)] == ["'paimon/table'", "'ingest_x_job'",
                                                                       "'no_orphan_files'"]

"""The README's Python snippets run as written: every ``python`` block of "Python API" (up to
"Your tables in Dagster") and the two-phase example of "Scale-out", in order, in one namespace,
in an empty directory, as a new user would paste them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def snippets() -> list[str]:
    text = README.read_text()
    api = text[text.index("## Python API\n"):text.index("## Your tables in Dagster")]
    two_phase = text[text.index("### Two-phase writes (Python API)"):]
    return BLOCK.findall(api) + BLOCK.findall(two_phase)[:1]


def test_the_python_api_snippets_run_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = snippets()
    assert len(blocks) >= 8
    namespace: dict[str, object] = {"__name__": "readme"}
    for number, block in enumerate(blocks, 1):
        exec(compile(block, f"README.md python block {number}", "exec"), namespace)
    assert (tmp_path / "warehouse" / "shop.db" / "orders" / "snapshot").is_dir()

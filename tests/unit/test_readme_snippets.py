"""The engine README's Python snippets run as written: every ``python`` block of
``paimon_core/README.md`` up to "Compatibility notes" (the API and the two-phase writes), in
order, in one namespace, in an empty directory, as a new user would paste them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "paimon_core" / "README.md"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def snippets() -> list[str]:
    text = README.read_text()
    return BLOCK.findall(text[:text.index("## Compatibility notes")])


def test_the_python_api_snippets_run_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = snippets()
    assert len(blocks) >= 8
    namespace: dict[str, object] = {"__name__": "readme"}
    for number, block in enumerate(blocks, 1):
        exec(compile(block, f"paimon_core/README.md python block {number}", "exec"), namespace)
    assert (tmp_path / "warehouse" / "shop.db" / "orders" / "snapshot").is_dir()

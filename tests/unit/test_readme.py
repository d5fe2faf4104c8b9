"""The engine README's options table is generated from the option declarations and must stay
current; the project README names the two commands first."""

from __future__ import annotations

from pathlib import Path

from paimon_core.options import options_markdown

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
ENGINE_README = ROOT / "paimon_core" / "README.md"


def test_options_table_matches_the_declarations() -> None:
    text = ENGINE_README.read_text()
    block = text.split("<!-- options-table:start -->\n", 1)[1].split("\n<!-- options-table:end -->", 1)[0]
    assert block == options_markdown()


def test_readme_names_the_two_commands_first() -> None:
    text = README.read_text()
    setup = text.index("## Set up")
    assert text.index("make demo", setup) < text.index("make test", setup) < text.index("## Quickstart")

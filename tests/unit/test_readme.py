"""The README's options table is generated from the option declarations and must stay current."""

from __future__ import annotations

from pathlib import Path

from paimon_core.options import options_markdown

README = Path(__file__).resolve().parents[2] / "README.md"


def test_options_table_matches_the_declarations() -> None:
    text = README.read_text()
    block = text.split("<!-- options-table:start -->\n", 1)[1].split("\n<!-- options-table:end -->", 1)[0]
    assert block == options_markdown()


def test_readme_names_the_two_commands_first() -> None:
    text = README.read_text()
    setup = text.index("## Set up")
    assert text.index("make demo", setup) < text.index("make test", setup) < text.index("## Python API")

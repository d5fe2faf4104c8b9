"""Environment variables a declaration's ``{{ env.X }}`` templates read, and those that are unset.

Dagster renders ``{{ env.X }}`` of an unset variable as nothing, which a string field then holds
as the text ``None``: a warehouse under ``<project>/None/warehouse``, a landing location watching
``None/clicks/...``. A template that is the variable alone must find it set; one with a fallback
(``{{ env.X or 'lake' }}``, ``{{ env('X', 'lake') }}``) says what it wants instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

TEMPLATE = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
BARE_VARIABLE = re.compile(r"^\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*$")


@dataclass(frozen=True, slots=True)
class UnsetVariable:
    """A field whose template reads an environment variable that is not set."""

    field: str  # tables[0].ingestion.landing.path
    variable: str

    def message(self) -> str:
        return (f"{self.field}: environment variable {self.variable} is not set ({{{{ env.{self.variable} }}}}); "
                f"set it, or give a fallback as {{{{ env.{self.variable} or '...' }}}}")


def unset_variables(value: Any, environ: Mapping[str, str], field: str = "") -> Iterator[UnsetVariable]:
    """Every bare ``{{ env.X }}`` in ``value`` (the raw attributes: dicts, lists, strings) whose
    variable ``environ`` lacks, with the path of its field."""
    if isinstance(value, str):
        for template in TEMPLATE.finditer(value):
            bare = BARE_VARIABLE.match(template.group(1))
            if bare and bare.group(1) not in environ:
                yield UnsetVariable(field, bare.group(1))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from unset_variables(item, environ, f"{field}.{key}" if field else str(key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from unset_variables(item, environ, f"{field}[{index}]")

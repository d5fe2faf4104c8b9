"""The declaration reference, generated from the spec dataclasses: every field of a
``PaimonTables`` component and of ``PaimonTableSpec`` with its type, default and documentation,
as declared where the field is (``doc(...)``). ``pipelines/REFERENCE.md`` holds it between two
markers and a test keeps it equal; ``python -m pipelines.reference`` rewrites it.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REFERENCE = Path(__file__).resolve().parent / "REFERENCE.md"
BEGIN = "<!-- generated fields: begin (python -m pipelines.reference) -->"
END = "<!-- generated fields: end -->"


def schema_classes() -> list[type]:
    """The component, the spec and its parts, in the order a reader meets them."""
    from pipelines.component import PaimonTables
    from pipelines.spec.declaration import PaimonTableSpec
    from pipelines.spec.parts import Column, Compaction, DataChecks, Ingestion, Input, Maintenance, Partitions
    from resources.landing_location import LandingLocation

    return [PaimonTables, PaimonTableSpec, Column, Partitions, Ingestion, LandingLocation, Input, Compaction,
            Maintenance, DataChecks]


def type_text(annotation: Any) -> str:
    """A field's type as a reader writes it: ``str``, ``Ingestion | None``, ``Mapping[str, str]``."""
    text = annotation if isinstance(annotation, str) else repr(annotation)
    text = re.sub(r"<class '([\w.]+)'>", r"\1", text)
    text = re.sub(r"\b(?:[a-z_]+\.)+([A-Za-z_]\w*)", r"\1", text)  # module paths off
    text = text.replace("NoneType", "None").replace("Callable[..., Any]", "callable")
    return text.replace("|", "or").replace("[", "&#91;").replace("]", "&#93;")


def default_text(field: dataclasses.Field[Any]) -> str:
    if field.default is not dataclasses.MISSING:
        value = field.default
        return "(required)" if value is dataclasses.MISSING else f"`{value!r}`"
    if field.default_factory is not dataclasses.MISSING:
        made = field.default_factory()
        return f"`{made!r}`" if not dataclasses.is_dataclass(made) else f"`{type(made).__name__}()`"
    return "(required)"


def rows(kind: type) -> Iterator[tuple[str, str, str, str]]:
    """``(field, type, default, documentation)`` of every field of ``kind``."""
    hints = typing.get_type_hints(kind, include_extras=True)
    for field in dataclasses.fields(kind):
        hint = hints[field.name]
        if typing.get_origin(hint) is typing.Annotated:
            annotation, *metadata = typing.get_args(hint)
        else:
            annotation, metadata = hint, []
        described = [m.description for m in metadata if getattr(m, "description", None)]
        yield field.name, type_text(annotation), default_text(field), (described[0] if described else "")


def generated() -> str:
    """The reference's generated part: a table of fields per class."""
    parts = [BEGIN]
    for kind in schema_classes():
        summary = (kind.__doc__ or "").strip().splitlines()[0]
        parts += ["", f"### `{kind.__name__}`", "", summary, "", "| field | type | default | what it does |",
                  "|---|---|---|---|"]
        parts += [f"| `{name}` | {kind_} | {default} | {doc.replace('|', '/')} |"
                  for name, kind_, default, doc in rows(kind)]
    return "\n".join([*parts, "", END])


def current() -> str:
    """The generated part as ``REFERENCE.md`` holds it now."""
    text = REFERENCE.read_text()
    return text[text.index(BEGIN):text.index(END) + len(END)]


def rewrite() -> None:
    text = REFERENCE.read_text()
    REFERENCE.write_text(text.replace(current(), generated()))


if __name__ == "__main__":
    rewrite()
    sys.stdout.write(f"rewrote {REFERENCE}\n")

"""How the spec's fields read from YAML where YAML cannot say the Python value itself.

The spec dataclasses are the component's schema (Dagster derives the YAML model from their
annotations); a field whose Python type YAML cannot express carries one of these resolvers:
columns as a list of ``{name, type}`` (or an Arrow schema in Python), a function as
``"module:function"`` (or a callable), option values and partition bounds as text (YAML reads
``2`` as a number and ``2024-01-01`` as a date). :func:`doc` documents a field where it is
declared, so the YAML schema, ``dg`` and an IDE show the same words.
"""

# No `from __future__ import annotations`: Dagster reads these annotations as real types.

import datetime as dt_
from collections.abc import Mapping
from typing import Any

import dagster as dg

# A YAML scalar an option value may be written as.
Scalar = str | int | float | bool


def doc(description: str) -> dg.Resolver:
    """A field's documentation, for the YAML schema and for readers of the dataclass alike."""
    return dg.Resolver.default(description=description)


def text(value: Any) -> str | None:
    """YAML reads ``2024-01-01`` as a date, ``2`` as a number and ``true`` as a boolean; the spec
    wants the text a user means (dates ISO, datetimes to the minute, booleans in lower case)."""
    if value is None:
        return None
    if isinstance(value, dt_.datetime):
        return value.strftime("%Y-%m-%d-%H:%M")
    if isinstance(value, dt_.date):
        return value.isoformat()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _text(context: dg.ResolutionContext, value: Any) -> str | None:
    return text(context.resolve_value(value))


def _option_texts(context: dg.ResolutionContext, value: Mapping[str, Any]) -> dict[str, str]:
    return {str(key): text(context.resolve_value(item)) or "" for key, item in value.items()}


def _as_given(context: dg.ResolutionContext, value: Any) -> Any:
    return context.resolve_value(value)


def text_field(description: str) -> dg.Resolver:
    """A text field YAML may write as a date, number or boolean (partition bounds)."""
    return dg.Resolver(_text, model_field_type=str | dt_.date | dt_.datetime | None, description=description)


def options_field(description: str) -> dg.Resolver:
    """Paimon options: text values, written in YAML as any scalar."""
    return dg.Resolver(_option_texts, model_field_type=dict[str, Scalar], description=description)


def function_field(description: str) -> dg.Resolver:
    """A callable in Python, ``"package.module:function"`` in YAML (imported when the spec is checked)."""
    return dg.Resolver(_as_given, model_field_type=str | None, description=description)


def type_field(description: str) -> dg.Resolver:
    """A column type: a Paimon / SQL type name in YAML, an Arrow type too in Python."""
    return dg.Resolver(_as_given, model_field_type=str, description=description)


def columns_field(column: type[dg.Resolvable], description: str) -> dg.Resolver:
    """The columns: a list of ``column`` entries in YAML, each resolved as a ``column``; in Python
    those or an Arrow schema."""

    def resolve(context: dg.ResolutionContext, value: Any) -> tuple[Any, ...]:
        return tuple(column.resolve_from_model(context.at_path(index), item) for index, item in enumerate(value))

    return dg.Resolver(resolve, model_field_type=list[column.model()], description=description)  # type: ignore[arg-type, misc]

"""What a ``defs.yaml`` that does not fit the schema is told: the field at fault at its own line,
a did-you-mean for a misspelt one, and none of the noise of the alternatives nobody wrote.

Dagster lets every field of a component's schema also be a template string, so a mistake inside
``tables:`` fails every alternative: pydantic reports the real error, then "Input should be a
valid string" for each enclosing field, and names union members (``tuple[PaimonTableSpecModel,
...]``) in the error's path, which makes the error's YAML line the ``tables:`` line. Here the
errors of those string alternatives are dropped where a real one exists, the member labels are
taken out of the paths, and an unknown field gets the known field it is a typo of.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, get_args

from pydantic import BaseModel, ValidationError, create_model, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError
from pydantic_core.core_schema import ErrorType

# Path parts that are a union member's label, not a field or an index.
MEMBER_LABEL = re.compile(r"^(str|int|float|bool|none|.*\[.*\]|[A-Z]\w*Model)$")
STANDARD_TYPES = frozenset(get_args(ErrorType))
# A text field's value that Dagster renders as a template ({{ env.X }} ...).
TEMPLATE_TEXT = r"^\s*\{\{"
MODEL_NAME = re.compile(r"\b([A-Z]\w*Model)\b")


def field_path(loc: Sequence[str | int]) -> tuple[str | int, ...]:
    """The error's path without union member labels: the fields and indexes a user wrote."""
    return tuple(part for part in loc if isinstance(part, int) or not MEMBER_LABEL.match(part))


def model_label(loc: Sequence[str | int]) -> str | None:
    """The last model a path went through (``IngestionModel``, or the one of a member label such as
    ``tuple[PaimonTableSpecModel, ...]``), naming whose field is unknown."""
    labels = [found for part in loc[:-1] if isinstance(part, str) for found in MODEL_NAME.findall(part)]
    return labels[-1] if labels else None


def hinted_errors(errors: Sequence[Mapping[str, Any]], fields_of: Mapping[str, Sequence[str]], root: str,
                  typo_of: Callable[[str, Sequence[str]], str | None]) -> list[InitErrorDetails]:
    """``errors`` (pydantic's) as a user should read them: see the module docstring. ``fields_of``
    maps a model's name to its fields; ``root`` is the name of the model the paths start in."""
    real = [e for e in errors if not (e["type"] == "string_type" and e["loc"] and e["loc"][-1] == "str")]
    kept = real or list(errors)
    details: list[InitErrorDetails] = []
    for error in kept:
        loc = field_path(error["loc"])
        if error["type"] == "extra_forbidden" and loc and isinstance(loc[-1], str):
            known = fields_of.get(model_label(error["loc"]) or root, ())
            near = typo_of(loc[-1], known)
            hint = f"; did you mean {near}?" if near else f" (fields: {', '.join(known)})"
            # A value error: Dagster re-raises errors by type with their context, which keeps its text.
            details.append(InitErrorDetails(type="value_error", loc=loc, input=error.get("input"),
                                            ctx={"error": ValueError(f"unknown field {loc[-1]}{hint}")}))
        elif error["type"] in STANDARD_TYPES:
            details.append(InitErrorDetails(type=error["type"], loc=loc, input=error.get("input"),
                                            ctx=error.get("ctx", {})))
        else:
            custom = PydanticCustomError(error["type"], error["msg"].replace("{", "{{").replace("}", "}}"))
            details.append(InitErrorDetails(type=custom, loc=loc, input=error.get("input")))
    return details


def with_choices(schema: dict[str, Any], choices: Mapping[tuple[str, str], Sequence[str]]) -> dict[str, Any]:
    """The JSON schema (what ``dg check yaml`` validates against) with the values a field may take
    (``(model name, field)``: values) instead of any text; a ``{{ template }}`` still passes."""
    for (model, name), values in choices.items():
        field = schema.get("$defs", {}).get(model, {}).get("properties", {}).get(name)
        chosen = [{"enum": list(values)}, {"type": "string", "pattern": TEMPLATE_TEXT}]
        if field is None:
            continue
        if field.get("type") == "string":
            del field["type"]
            field["anyOf"] = chosen
        elif {"type": "string"} in field.get("anyOf", []):  # optional: str | None
            field["anyOf"] = [*chosen, *(a for a in field["anyOf"] if a != {"type": "string"})]
    for model in [schema, *schema.get("$defs", {}).values()]:
        for field in model.get("properties", {}).values():
            alternatives = field.get("anyOf", [])
            # Dagster's template alternative of a list, an object or a number: only a template.
            if {"type": "string"} in alternatives and any(
                    "$ref" in a or a.get("type") in ("array", "object", "integer", "number", "boolean")
                    for a in alternatives):
                field["anyOf"] = [{"type": "string", "pattern": TEMPLATE_TEXT} if a == {"type": "string"} else a
                                  for a in alternatives]
    return schema


def hinted_model(base: type[BaseModel], fields_of: Mapping[str, Sequence[str]],
                 typo_of: Callable[[str, Sequence[str]], str | None],
                 choices: Mapping[tuple[str, str], Sequence[str]] | None = None) -> type[BaseModel]:
    """``base`` whose validation errors read as :func:`hinted_errors` says, and whose JSON schema
    lists the ``choices`` of its text fields (:func:`with_choices`)."""

    def hinted(cls: type[BaseModel], data: Any, handler: Any) -> Any:
        try:
            return handler(data)
        except ValidationError as exc:
            details = hinted_errors(exc.errors(), fields_of, base.__name__, typo_of)
            raise ValidationError.from_exception_data(exc.title, details) from None

    validator = model_validator(mode="wrap")(classmethod(hinted))  # type: ignore[arg-type]
    model = create_model(base.__name__, __base__=base, __validators__={"hinted": validator})  # type: ignore[dict-item]
    schema_of = model.model_json_schema

    def model_json_schema(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return with_choices(schema_of(*args, **kwargs), choices or {})

    model.model_json_schema = model_json_schema  # type: ignore[method-assign]
    return model

"""How a defs.yaml that does not fit the schema is told (pure: pydantic's errors in, the user's out)."""

from __future__ import annotations

from typing import Any

from pipelines.spec.validation import typo_of
from pipelines.spec.yaml_errors import field_path, hinted_errors, model_label

MEMBER = "tuple[PaimonTableSpecModel, ...]"
FIELDS = {"PaimonTablesModel": ["warehouse", "tables"], "PaimonTableSpecModel": ["table", "primary_key"],
          "IngestionModel": ["mode", "function"]}


def error(kind: str, loc: tuple[Any, ...], msg: str = "") -> dict[str, Any]:
    return {"type": kind, "loc": loc, "msg": msg, "input": None}


def test_member_labels_leave_the_path_and_name_the_model() -> None:
    loc = ("tables", MEMBER, 0, "ingestion", "IngestionModel", "fucntion")
    assert field_path(loc) == ("tables", 0, "ingestion", "fucntion")
    assert model_label(loc) == "IngestionModel"
    assert model_label(("tables", MEMBER, 0, "primary_keys")) == "PaimonTableSpecModel"
    assert model_label(("tabels",)) is None


def test_the_string_alternatives_go_and_a_misspelt_field_gets_the_one_meant() -> None:
    errors = [error("extra_forbidden", ("tables", MEMBER, 0, "primary_keys")),
              error("string_type", ("tables", MEMBER, 0, "ingestion", "str"), "Input should be a valid string"),
              error("string_type", ("tables", "str"), "Input should be a valid string"),
              error("extra_forbidden", ("tabels",))]

    details = hinted_errors(errors, FIELDS, "PaimonTablesModel", typo_of)

    assert [(d["loc"], str(d["ctx"]["error"])) for d in details] == [
        (("tables", 0, "primary_keys"), "unknown field primary_keys; did you mean primary_key?"),
        (("tabels",), "unknown field tabels; did you mean tables?")]


def test_a_field_like_no_other_lists_the_fields_and_other_errors_pass_as_they_are() -> None:
    details = hinted_errors([error("extra_forbidden", ("zzz",)), error("missing", ("tables",), "Field required")],
                            FIELDS, "PaimonTablesModel", typo_of)

    assert str(details[0]["ctx"]["error"]) == "unknown field zzz (fields: warehouse, tables)"
    assert (details[1]["type"], details[1]["loc"]) == ("missing", ("tables",))

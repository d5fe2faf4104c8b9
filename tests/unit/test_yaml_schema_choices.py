"""The component's JSON schema (what ``dg check yaml`` validates) lists the enumerated fields'
values, still takes a template for every field, and still takes every valid declaration."""

from __future__ import annotations

from pathlib import Path

import yaml
from jsonschema import Draft202012Validator

from pipelines.component import PaimonTables

DEMO = Path(__file__).resolve().parents[2] / "pipelines" / "demo" / "defs" / "tables" / "defs.yaml"
TABLE = {"table": "a.b", "columns": [{"name": "id", "type": "BIGINT"}],
         "ingestion": {"mode": "upsert", "function": "m:f"}}


def errors(attributes: dict[str, object]) -> list[str]:
    validator = Draft202012Validator(PaimonTables.model().model_json_schema())
    return [error.message for error in validator.iter_errors(attributes)]


def test_a_value_no_field_takes_is_refused_and_a_template_passes() -> None:
    bad = {**TABLE, "ingestion": {"mode": "merge", "function": "m:f"}}
    templated = {**TABLE, "ingestion": {"mode": "{{ env.MODE or 'upsert' }}", "function": "m:f"}}

    assert errors({"warehouse": "/w", "tables": [bad]})
    assert errors({"warehouse": "/w", "tables": [templated]}) == []
    assert errors({"warehouse": "/w", "tables": "{{ context.load_component('x') }}"}) == []


def test_every_declaration_of_the_demo_and_the_reference_fits() -> None:
    from tests.unit.test_reference import examples

    assert errors(yaml.safe_load(DEMO.read_text())["attributes"]) == []
    assert errors({"warehouse": "/w", "tables": examples()}) == []

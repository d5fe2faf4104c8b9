"""Which ``{{ env.X }}`` templates of a declaration read an unset variable (pure: the raw attributes)."""

from __future__ import annotations

from pipelines.spec.environment import UnsetVariable, unset_variables

ATTRIBUTES = {
    "warehouse": "{{ env.WH_ROOT }}/warehouse",
    "tables": [
        {"table": "web.clicks", "ingestion": {"landing": {"path": "{{env.LANDING}}/clicks/dt={partition}/*.parquet"}}},
        {"table": "crm.customers", "maintenance": {"expire_cron": "{{ env.EXPIRE_CRON or '0 * * * *' }}"},
         "options": {"bucket": "{{ env('BUCKETS', '2') }}"}},
    ],
}


def test_bare_templates_of_unset_variables_are_named_with_their_field() -> None:
    found = list(unset_variables(ATTRIBUTES, {}))

    assert found == [UnsetVariable("warehouse", "WH_ROOT"),
                     UnsetVariable("tables[0].ingestion.landing.path", "LANDING")]
    assert "tables[0].ingestion.landing.path: environment variable LANDING is not set" in found[1].message()


def test_set_variables_and_templates_with_a_fallback_pass() -> None:
    assert list(unset_variables(ATTRIBUTES, {"WH_ROOT": "/lake", "LANDING": ""})) == []

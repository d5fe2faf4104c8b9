"""A small Dagster project of the tests' own, as a user lays one out: four tables declared in
``defs/tables/defs.yaml`` (an append table, a CDC primary-key table whose full compactions write
its changelog, a per-day aggregate of it and a consumer of its changes), their source functions
and resources, and plain seeded generators (``data``), so the Dagster tests do not move when the
demo does. ``definitions.defs`` is its code location (``workspace.yaml``)."""

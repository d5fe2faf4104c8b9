"""Dagster definitions that ingest and serve Paimon tables (see ``pipelines.definitions``)."""

"""Concurrency torture: writer, compaction and expiry processes racing on one PK and one append table."""

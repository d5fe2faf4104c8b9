"""Keeping a table's storage in bounds: snapshot expiry and orphan-file cleanup (jobs and
schedules), and the checks that judge whether they keep up (pure verdicts apart from their runs)."""

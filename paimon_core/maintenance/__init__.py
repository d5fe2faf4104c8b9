"""Table maintenance: snapshot expiry, rollback (and, later, orphan-file cleanup)."""

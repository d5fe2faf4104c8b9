"""What a writer that maintains its table does after each commit (tables without write-only).

Paimon's writers compact the buckets they wrote when the picker asks for it, then create
automatic tags and expire snapshots; writers with ``write-only`` leave all of it to dedicated
jobs. The data is already committed when this runs, so a failure here is logged, never raised:
the next maintaining write or a dedicated job picks the work up again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from typing import TYPE_CHECKING

from paimon_core.compaction.compactor import CompactionResult, TableCompactor
from paimon_core.errors import CommitConflictError, PaimonError, UnsupportedFeatureError
from paimon_core.maintenance.auto_tags import create_automatic_tags
from paimon_core.maintenance.expiry import expire

if TYPE_CHECKING:
    from paimon_core.table_context import TableContext

log = logging.getLogger(__name__)


def maintain_after_commit(table: TableContext, written: Collection[tuple[bytes, int]], *, commit_user: str,
                          commit_identifier: int) -> CompactionResult | None:
    """Compact the (partition row, bucket) pairs just written if due, then tag and expire."""
    compaction = compact_written(table, written, commit_user=commit_user, commit_identifier=commit_identifier) \
        if written else None
    expire_after_commit(table)
    return compaction


def compact_written(table: TableContext, written: Collection[tuple[bytes, int]], *, commit_user: str,
                    commit_identifier: int) -> CompactionResult | None:
    """Compact the buckets a commit wrote, when the picker asks for it (a COMPACT snapshot)."""
    try:
        return TableCompactor(table, commit_user=commit_user).compact(only=written,
                                                                      commit_identifier=commit_identifier)
    except CommitConflictError as exc:
        log.info("compaction after the write to %s skipped: %s", table.name, exc)
    except (PaimonError, OSError):  # storage errors too: the commit must not be reported failed
        log.exception("compaction after the write to %s failed; the written data is committed", table.name)
    return None


def expire_after_commit(table: TableContext) -> None:
    """Automatic tags, then snapshot expiry (the tag keeps the period's last snapshot)."""
    try:
        create_automatic_tags(table, int(time.time() * 1000))
        expire(table)
    except UnsupportedFeatureError as exc:
        log.info("no snapshot expiry after the write to %s: %s", table.name, exc)
    except (PaimonError, OSError):  # storage errors too: the commit must not be reported failed
        log.exception("snapshot expiry after the write to %s failed; the written data is committed", table.name)

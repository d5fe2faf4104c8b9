"""Progress of long maintenance work, reported to an optional callback.

``progress(stage, done, total)`` is called as units of work finish (``total`` None when it is not
known in advance, e.g. while listing directories). The command line draws a bar from it; the API
default is none. Callbacks run on the calling thread and must be cheap.
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str, int, "int | None"], None]


def no_progress(stage: str, done: int, total: int | None) -> None:
    """The default callback: report nothing."""

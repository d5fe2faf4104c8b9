"""A progress bar on stderr for long work (compaction of many buckets, listing files for orphan
cleanup, expiry), drawn only when stderr is a terminal so scripts and logs stay quiet."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """A callable ``(stage, done, total)`` as the API's ``progress=`` arguments take it.

    ``total`` None counts without a bar. Redraws at most ten times a second; :meth:`close`
    clears the line.
    """

    def __init__(self, stream: TextIO | None = None, *, enabled: bool | None = None, width: int = 30) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.width = width
        self._last = 0.0
        self._drawn = False

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        final = total is not None and done >= total
        if now - self._last < 0.1 and not final:
            return
        self._last = now
        if total:
            filled = min(self.width, self.width * done // total)
            line = f"{stage} [{'#' * filled}{'.' * (self.width - filled)}] {done}/{total}"
        else:
            line = f"{stage}: {done}"
        self.stream.write(f"\r\x1b[2K{line}")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._drawn = False

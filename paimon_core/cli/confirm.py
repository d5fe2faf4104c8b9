"""Confirmation of destructive commands: they show what would change first, then act only
with ``--yes`` or an answer typed at a terminal, never by default in a script."""

from __future__ import annotations

import sys
from typing import TextIO

from paimon_core.errors import PaimonError


class NotConfirmedError(PaimonError):
    """A destructive command was not confirmed; nothing was changed."""


def confirmed(question: str, *, yes: bool, stdin: TextIO | None = None, stderr: TextIO | None = None) -> bool:
    """Whether to go ahead: ``--yes`` says so; at a terminal the user is asked; otherwise
    :class:`NotConfirmedError` names the flag, since a script must not hang on a prompt."""
    if yes:
        return True
    stdin = stdin or sys.stdin
    stderr = stderr or sys.stderr
    if not stdin.isatty():
        raise NotConfirmedError(f"{question.rstrip('?')}: not confirmed, nothing was changed; "
                                "pass --yes to do it without a terminal")
    stderr.write(f"{question} [y/N] ")
    stderr.flush()
    answer = stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise NotConfirmedError("not confirmed; nothing was changed")
    return True

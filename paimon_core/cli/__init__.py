"""The ``paimon`` command line (entry point :func:`main`)."""

from __future__ import annotations

from paimon_core.cli.main import build_parser, main

__all__ = ["build_parser", "main"]

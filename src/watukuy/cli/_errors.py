"""How the CLI reports failures: one line on stderr, and an exit status that says whose fault.

Exit statuses:

- ``0``: done.
- ``1``: the command ran but something failed at run time (a ``tick`` cycle failed, a
  backfill lane errored) or an unexpected error happened (a bug: set ``WATUKUY_DEBUG=1``
  to see its traceback).
- ``2``: a mistake in what was asked: unknown command, option or poller, a missing
  ``--partition``, a bad duration or cursor, an application that cannot be imported, a
  store that cannot be reached. Nothing was changed.
- ``130``: interrupted with Ctrl-C before the command finished.
"""

from __future__ import annotations

import os
import sys
import traceback

import click

from watukuy.model.errors import WatukuyError
from watukuy.model.redact import redact_text

__all__ = ["EXIT_FAILED", "EXIT_MISTAKE", "CliError", "describe_failure"]

EXIT_FAILED = 1
EXIT_MISTAKE = 2
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """A mistake in the command line or its environment (exit status 2 by default).

    Args:
        message: One line saying what is wrong and, where it helps, what to do instead.
        exit_code: The exit status (``1`` for what failed at run time).
    """

    def __init__(self, message: str, *, exit_code: int = EXIT_MISTAKE) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def _one_line(text: str) -> str:
    # Store URLs, request URLs and headers reach error messages: never print a secret.
    return redact_text(" ".join(str(text).split()))


def describe_failure(error: BaseException) -> tuple[str, int]:
    """The stderr line and exit status for an exception that ended a command."""
    if isinstance(error, CliError):
        return f"error: {_one_line(error.message)}", error.exit_code
    if isinstance(error, click.UsageError):
        command = error.ctx.command_path if error.ctx is not None else "watukuy"
        hint = f" (see '{command} --help')"
        return f"error: {_one_line(error.format_message())}{hint}", EXIT_MISTAKE
    if isinstance(error, click.ClickException):
        return f"error: {_one_line(error.format_message())}", error.exit_code
    if isinstance(error, WatukuyError):
        # Configuration, unknown pollers, unreachable stores, replay without a log: all
        # things the caller can fix, reported with their stable code.
        return f"error ({error.code}): {_one_line(error.message)}", EXIT_MISTAKE
    if os.environ.get("WATUKUY_DEBUG"):
        traceback.print_exception(error, file=sys.stderr)
    return (
        f"error: unexpected {type(error).__name__}: {_one_line(str(error))} "
        "(set WATUKUY_DEBUG=1 to see the traceback)",
        EXIT_FAILED,
    )

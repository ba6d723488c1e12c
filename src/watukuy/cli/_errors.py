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

With ``--json`` the same failure is one JSON object on stdout instead, with the same exit
status: ``{"error": {"type": "ConfigError", "code": "CONFIG", "message": "...",
"field": "--max-duration"}}`` (``code`` for watukuy's own errors, ``field`` when the
mistake is in one option or field), redacted as the line is.
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from dataclasses import dataclass
from typing import Any

import click

from watukuy.model.errors import WatukuyError
from watukuy.model.redact import redact_text

__all__ = ["EXIT_FAILED", "EXIT_MISTAKE", "CliError", "Failure", "describe_failure", "failure_of"]

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


# "--max-duration: expected ..." names its option first: that is the field of the mistake.
_LEADING_OPTION = re.compile(r"^(--[a-z][a-z0-9-]*): ")


@dataclass(frozen=True)
class Failure:
    """How a command failed, ready for either output: a stderr line or a JSON object.

    Args:
        type: The exception's class name (``"ConfigError"``, ``"UsageError"``).
        message: One line, redacted.
        status: The exit status.
        code: The stable code of a watukuy error, else ``None``.
        field: The option or field at fault, when there is one.
        hint: Where to read more (the command's ``--help``), or ``""``.
    """

    type: str
    message: str
    status: int
    code: str | None = None
    field: str | None = None
    hint: str = ""

    def line(self) -> str:
        """The one stderr line."""
        label = "error" if self.code is None else f"error ({self.code})"
        return f"{label}: {self.message}{self.hint}"

    def to_json(self) -> dict[str, Any]:
        """``{"error": {...}}``: what ``--json`` prints on stdout."""
        body: dict[str, Any] = {"type": self.type, "message": self.message}
        if self.code is not None:
            body["code"] = self.code
        if self.field is not None:
            body["field"] = self.field
        return {"error": body}


def _field_of(message: str) -> str | None:
    match = _LEADING_OPTION.match(message)
    return match.group(1) if match else None


def _usage_field(error: click.UsageError) -> str | None:
    param = getattr(error, "param", None)
    if isinstance(param, click.Parameter) and param.opts:
        return max(param.opts, key=len)
    option = getattr(error, "option_name", None)
    return option if isinstance(option, str) else None


def failure_of(error: BaseException) -> Failure:
    """What to report for an exception that ended a command."""
    kind = type(error).__name__
    if isinstance(error, CliError):
        message = _one_line(error.message)
        return Failure(kind, message, error.exit_code, field=_field_of(message))
    if isinstance(error, click.UsageError):
        command = error.ctx.command_path if error.ctx is not None else "watukuy"
        return Failure(
            kind,
            _one_line(error.format_message()),
            EXIT_MISTAKE,
            field=_usage_field(error),
            hint=f" (see '{command} --help')",
        )
    if isinstance(error, click.ClickException):
        return Failure(kind, _one_line(error.format_message()), error.exit_code)
    if isinstance(error, WatukuyError):
        # Configuration, unknown pollers, unreachable stores, replay without a log: all
        # things the caller can fix, reported with their stable code.
        field = getattr(error, "field", None)
        return Failure(
            kind,
            _one_line(error.message),
            EXIT_MISTAKE,
            code=error.code,
            field=field if isinstance(field, str) else None,
        )
    if os.environ.get("WATUKUY_DEBUG"):
        traceback.print_exception(error, file=sys.stderr)
    return Failure(
        kind,
        f"unexpected {kind}: {_one_line(str(error))} (set WATUKUY_DEBUG=1 to see the traceback)",
        EXIT_FAILED,
    )


def describe_failure(error: BaseException) -> tuple[str, int]:
    """The stderr line and exit status for an exception that ended a command."""
    failure = failure_of(error)
    return failure.line(), failure.status

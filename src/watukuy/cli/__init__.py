"""The ``watukuy`` command: operate pollers from a shell, a cron job or a container.

Commands (``watukuy COMMAND --help`` for every option)::

    watukuy inspect        [FILE.toml] [--json]
    watukuy tick           [FILE.toml] [--max-duration 50s] [--only NAME]...
    watukuy run            [FILE.toml] [--refresh 1s] [--stop-timeout 30s]
    watukuy trigger        --poller NAME [--partition KEY]
    watukuy pause          --poller NAME [--partition KEY]
    watukuy resume         --poller NAME [--partition KEY]
    watukuy backfill       --poller NAME --from CURSOR|null [--to CURSOR] [--force] [--no-wait]
    watukuy replay         --poller NAME --from TIME [--to TIME]
    watukuy reset-cursor   --poller NAME --to CURSOR|null [--clear-snapshot]
    watukuy parked ls      --poller NAME [--kind poison|invalid] [--limit N]
    watukuy parked retry   --poller NAME --ids ID,ID
    watukuy parked discard --poller NAME --ids ID,ID
    watukuy migrate
    watukuy demo           [--duration 30s] [--seed N] [--db PATH] [--json]
    watukuy ui             [--host 127.0.0.1] [--port 8765] [--token TEXT] [--json]
    watukuy version

Where the engine comes from: ``--app package.module:attribute`` (or ``WATUKUY_APP``), the
uvicorn/celery convention; the attribute is an ``Engine`` or a zero-argument function
(sync or async) returning one, and the current directory is importable. A path ending in
``.toml`` names a configuration file instead (:func:`watukuy.rest.load_config`), whose
pollers, budgets and sinks make the engine; every command also takes it as its argument
(``watukuy run pollers.toml``, ``watukuy inspect pollers.toml``), and ``--store``
overrides its ``[engine] store``.
The store-only
commands (``inspect``, ``trigger``, ``pause``, ``resume``, ``parked``, ``migrate``,
``reset-cursor``) also work with just ``--store URL`` (or ``WATUKUY_STORE``, any URL
:func:`watukuy.store_from_url` takes); without the poller definitions they operate on the
keys the store holds, and ``reset-cursor --to`` takes ``null`` or the stored JSON form of
a cursor (see :mod:`watukuy.cli._operators`).

Every command takes ``--json`` (one line of JSON on stdout; ``run --json`` prints one
``inspect`` report per refresh, ``ui --json`` one line when it serves). Mistakes print one
line on stderr and exit with status 2, or with ``--json`` one ``{"error": {...}}`` object
on stdout; see :mod:`watukuy.cli._errors` for every status.

From Python, :func:`main` runs a command and returns its exit status::

    from watukuy.cli import CliIO, main

    status = main(["inspect", "--store", "sqlite:///wk.db", "--json"], CliIO(out, err)) ``WATUKUY_CONNECT_TIMEOUT`` (default
``10s``) bounds the wait for a store that does not answer.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TextIO

import click

from watukuy.model import json as wkjson

from ._commands import cli
from ._errors import EXIT_INTERRUPTED, Failure, failure_of

__all__ = ["CliIO", "cli", "main"]


@dataclass(frozen=True)
class CliIO:
    """Where a command run by :func:`main` writes.

    Args:
        stdout: Text stream of the command's output (tables, JSON).
        stderr: Text stream of its error lines and progress.
    """

    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)


@contextlib.contextmanager
def _writing_to(io: CliIO | None) -> Iterator[None]:
    # click, rich and print() all write to whatever sys.stdout / sys.stderr are when they
    # write, so swapping them for the call is what sends every line to the given streams.
    if io is None:
        yield
        return
    with contextlib.redirect_stdout(io.stdout), contextlib.redirect_stderr(io.stderr):
        yield


def _asks_for_json(args: Sequence[str]) -> bool:
    """Whether ``--json`` is among the options (before a ``--``), however the parse went."""
    for arg in args:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False


def _report(failure: Failure, as_json: bool) -> int:
    if as_json:
        click.echo(wkjson.dumps(failure.to_json()))
    else:
        print(failure.line(), file=sys.stderr)
    return failure.status


def main(argv: Sequence[str] | None = None, io: CliIO | None = None) -> int:
    """Run the ``watukuy`` command line and return its exit status.

    The console script exits with this status; a caller in Python gets it back, with no
    ``SystemExit`` (see :mod:`watukuy.cli._errors` for what each status means).

    Args:
        argv: Arguments without the program name (default: ``sys.argv[1:]``).
        io: Where the command writes (default: ``sys.stdout`` and ``sys.stderr``).

    Returns:
        The exit status: 0 done, 1 failed at run time, 2 a mistake in the command, 130
        interrupted.
    """
    args = list(argv) if argv is not None else sys.argv[1:]
    as_json = _asks_for_json(args)
    with _writing_to(io):
        try:
            status = cli.main(args=args, prog_name="watukuy", standalone_mode=False)
        except (KeyboardInterrupt, click.exceptions.Abort):
            failure = Failure("Interrupted", "interrupted", EXIT_INTERRUPTED)
            if as_json:
                return _report(failure, as_json=True)
            print("interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        except click.exceptions.NoArgsIsHelpError as error:
            click.echo(error.ctx.get_help() if error.ctx is not None else "")
            return 0
        except Exception as error:
            return _report(failure_of(error), as_json)
        return status if isinstance(status, int) else 0

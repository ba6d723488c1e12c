"""The ``watukuy`` command: operate pollers from a shell, a cron job or a container.

Commands (``watukuy COMMAND --help`` for every option)::

    watukuy inspect        [--json]
    watukuy tick           [--max-duration 50s] [--only NAME]...
    watukuy run            [--refresh 1s] [--stop-timeout 30s]
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
    watukuy ui             [--host 127.0.0.1] [--port 8765] [--token TEXT]
    watukuy version

Where the engine comes from: ``--app package.module:attribute`` (or ``WATUKUY_APP``), the
uvicorn/celery convention; the attribute is an ``Engine`` or a zero-argument function
(sync or async) returning one, and the current directory is importable. The store-only
commands (``inspect``, ``trigger``, ``pause``, ``resume``, ``parked``, ``migrate``,
``reset-cursor``) also work with just ``--store URL`` (or ``WATUKUY_STORE``, any URL
:func:`watukuy.store_from_url` takes); without the poller definitions they operate on the
keys the store holds, and ``reset-cursor --to`` takes ``null`` or the stored JSON form of
a cursor (see :mod:`watukuy.cli._operators`).

Every command takes ``--json`` (one line of JSON on stdout; ``run --json`` prints one
``inspect`` report per refresh). Mistakes print one line on stderr and exit with status 2;
see :mod:`watukuy.cli._errors` for every status. ``WATUKUY_CONNECT_TIMEOUT`` (default
``10s``) bounds the wait for a store that does not answer.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from ._commands import cli
from ._errors import EXIT_INTERRUPTED, describe_failure

__all__ = ["cli", "main"]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``watukuy`` command line and exit with its status.

    Args:
        argv: Arguments without the program name (default: ``sys.argv[1:]``).
    """
    try:
        status = cli.main(
            args=list(argv) if argv is not None else None,
            prog_name="watukuy",
            standalone_mode=False,
        )
    except (KeyboardInterrupt, click.exceptions.Abort):
        print("interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except click.exceptions.NoArgsIsHelpError as error:
        click.echo(error.ctx.get_help() if error.ctx is not None else "")
        sys.exit(0)
    except Exception as error:
        line, status = describe_failure(error)
        print(line, file=sys.stderr)
        sys.exit(status)
    sys.exit(status if isinstance(status, int) else 0)

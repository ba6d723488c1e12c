"""The ``watukuy`` commands (click). Each one parses its options, opens its target, does one
thing, and prints either rich text or, with ``--json``, one line of JSON."""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from watukuy.model import json as wkjson
from watukuy.model.durations import parse_duration

from ._errors import CliError

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from watukuy.model.rows import ParkedKind, ParkedRow

    from ._target import Target

# rich (tables, live views, progress bars) is imported by the commands that print, never by
# ``watukuy --help``, ``--version`` or ``--json``: it costs more to import than click. The
# same goes for the engine, the stores and asyncio (``_target``, ``_operators``): a command
# imports them when it runs.

__all__ = ["cli"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

_UNBOUNDED_WIDTH = 1_000_000

# Subcommands that live in other packages or need optional extras, imported only when asked
# for so that the CLI stays fast to start (the demo pulls in the simulated vendor, httpx and
# rich; ui pulls in Starlette, Jinja2 and uvicorn). The
# architecture contract puts watukuy.cli above watukuy.demo, so this dependency is
# declared, not hidden. The one-line help is written here so that ``--help`` lists the
# command without importing it.
_LAZY_COMMANDS = {
    "demo": (
        "watukuy.demo.command",
        "demo",
        "Poll a simulated vendor API into ./watukuy-demo.db and show the events.",
    ),
    "ui": (
        "watukuy.cli._ui",
        "ui",
        "Serve the admin page (keys, circuits, parked events, actions) on 127.0.0.1.",
    ),
}


def _version() -> str:
    from watukuy._version import __version__

    return __version__


class _Group(click.Group):
    """A group that also knows the lazily loaded subcommands."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *_LAZY_COMMANDS])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in _LAZY_COMMANDS:
            module_name, attribute, _ = _LAZY_COMMANDS[cmd_name]
            command = getattr(importlib.import_module(module_name), attribute)
            assert isinstance(command, click.Command)
            return command
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            if name in _LAZY_COMMANDS:
                # A stand-in carrying the help line, so the real command is not imported.
                rows.append((name, click.Command(name, help=_LAZY_COMMANDS[name][2])))
                continue
            command = super().get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command))
        if not rows:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in rows)
        with formatter.section("Commands"):
            formatter.write_dl(
                [(name, command.get_short_help_str(limit)) for name, command in rows]
            )


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"watukuy {_version()}")
        ctx.exit(0)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Print the version and exit.",
)
@click.option(
    "--app",
    "-A",
    "app",
    metavar="MODULE:ATTR|FILE.toml",
    help="The application's engine, or a pollers.toml file, for every command (also "
    "accepted after the command).",
)
@click.option(
    "--store",
    "store_url",
    metavar="URL",
    help="Store URL for the store-only commands (also accepted after the command).",
)
@click.pass_context
def cli(ctx: click.Context, app: str | None, store_url: str | None) -> None:
    """watukuy: webhooks for APIs that don't have them.

    Operate pollers from the shell. Name your application with --app package.module:engine
    (or -A, or WATUKUY_APP), before or after the command, or describe the pollers in a TOML
    file and name it instead: watukuy run pollers.toml, watukuy tick pollers.toml, or
    --app pollers.toml for any command (--store then overrides the file's [engine] store).
    The store-only commands (inspect,
    trigger, pause, resume, parked, deletes, migrate, reset-cursor) also work with just
    --store URL (or WATUKUY_STORE). Every command takes --json. Exit status: 0 done, 1
    failed at run time, 2 a mistake in the command (nothing changed).
    """
    ctx.obj = {"app": app, "store_url": store_url}


# --- shared options and plumbing -----------------------------------------------------------


# Set on the context by the optional FILE argument every command takes: a configuration
# file (pollers.toml) in place of --app.
_FILE = "watukuy.file"


def _remember_file(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.meta[_FILE] = value


def _target_options(fn: F) -> F:
    # `watukuy run pollers.toml`, `watukuy trigger pollers.toml --poller x`: the file in
    # place of --app, for every command.
    fn = click.argument(
        "file",
        required=False,
        metavar="[FILE.toml]",
        expose_value=False,
        callback=_remember_file,
    )(fn)
    fn = click.option(
        "--json", "as_json", is_flag=True, help="Print one line of JSON instead of tables."
    )(fn)
    fn = click.option(
        "--store",
        "store_url",
        envvar="WATUKUY_STORE",
        metavar="URL",
        help="Store URL (sqlite:///file.db, postgresql://..., redis://...) for the "
        "store-only commands; env WATUKUY_STORE.",
    )(fn)
    fn = click.option(
        "--app",
        "-A",
        "app",
        envvar="WATUKUY_APP",
        metavar="MODULE:ATTR|FILE.toml",
        help="The application's engine, e.g. myapp.sync:engine (an Engine or a function "
        "returning one), or a configuration file describing the pollers, e.g. "
        "pollers.toml; env WATUKUY_APP.",
    )(fn)
    return fn


def _key_options(fn: F) -> F:
    fn = click.option(
        "--partition", metavar="KEY", help="Partition key (required for partitioned pollers)."
    )(fn)
    fn = click.option("--poller", required=True, metavar="NAME", help="Poller name.")(fn)
    return fn


# Set on the context when the application prints its events on stdout (a configuration
# file with a stdout sink): the command's own output then goes to stderr, so that stdout
# stays one CloudEvent per line.
_STDOUT_TAKEN = "watukuy.stdout_taken"


def _stdout_taken() -> bool:
    ctx = click.get_current_context(silent=True)
    return ctx is not None and bool(ctx.meta.get(_STDOUT_TAKEN))


def _console() -> Console:
    import sys

    from rich.console import Console

    # Names and messages are printed as they are: no markup, no emoji codes, no colouring
    # of numbers that merely look interesting.
    console = Console(highlight=False, soft_wrap=False, markup=False, emoji=False)
    if _stdout_taken():
        # No live view either: the events written between its refreshes would tear it.
        console = Console(
            file=sys.stderr,
            force_terminal=False,
            highlight=False,
            soft_wrap=False,
            markup=False,
            emoji=False,
        )
    if not console.is_terminal:
        # Piped or redirected: print every value in full, whatever COLUMNS says.
        console.width = _UNBOUNDED_WIDTH
    return console


def _emit(as_json: bool, data: Any, human: RenderableType | str) -> None:
    if as_json:
        click.echo(wkjson.dumps(wkjson.to_jsonable(data)), err=_stdout_taken())
    else:
        _console().print(human)


def _key_name(poller: str, partition: str) -> str:
    from ._render import key_name

    return key_name(poller, partition)


def _run(coro: Coroutine[Any, Any, T]) -> T:
    import asyncio

    return asyncio.run(coro)


def _chosen_target(app: str | None, store_url: str | None) -> tuple[str | None, str | None]:
    """``--app`` / ``--store`` given after the command win, then those given before it, then
    the environment (``WATUKUY_APP`` / ``WATUKUY_STORE``)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return app, store_url
    before: dict[str, Any] = ctx.find_root().obj or {}
    chosen: list[str | None] = []
    for name, value in (("app", app), ("store_url", store_url)):
        source = ctx.get_parameter_source(name)
        typed_after = source is click.core.ParameterSource.COMMANDLINE
        chosen.append(value if typed_after or before.get(name) is None else before[name])
    return chosen[0], chosen[1]


def _typed_app() -> str | None:
    """``--app`` as typed on the command line (before or after the command), not from the
    environment."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return None
    if ctx.get_parameter_source("app") is click.core.ParameterSource.COMMANDLINE:
        typed: str | None = ctx.params.get("app")
        return typed
    before: dict[str, Any] = ctx.find_root().obj or {}
    return before.get("app")


async def _on_target(
    command: str,
    app: str | None,
    store_url: str | None,
    work: Callable[[Target], Awaitable[T]],
    *,
    need_engine: bool = False,
    create: bool = False,
) -> T:
    from ._target import open_target

    app, store_url = _chosen_target(app, store_url)
    ctx = click.get_current_context(silent=True)
    file = None if ctx is None else ctx.meta.get(_FILE)
    if file is not None:
        # The positional file wins over WATUKUY_APP; next to a different --app it is a
        # mistake, not a choice to make silently.
        typed = _typed_app()
        if typed is not None and typed != file:
            raise CliError(
                f"{command}: got both the configuration file {file!r} and --app {typed!r}; give one"
            )
        app = file
    target = await open_target(
        command=command, app=app, store_url=store_url, need_engine=need_engine, create=create
    )
    ctx = click.get_current_context(silent=True)
    if ctx is not None and target.stdout_taken:
        ctx.meta[_STDOUT_TAKEN] = True
    try:
        return await work(target)
    finally:
        await target.close()


def _duration(value: str | None, option: str) -> str | None:
    """Check a duration option before anything is loaded (a mistake costs nothing)."""
    if value is not None:
        parse_duration(value, option)
    return value


def _raw_cursor(value: str | None) -> str | None:
    """``null`` on the command line is ``None``: the initial cursor for ``reset-cursor``,
    the very beginning for ``backfill --from``."""
    return None if value is None or value == "null" else value


def _time_arg(value: str) -> str | int:
    """Epoch milliseconds when all digits, else ISO 8601 text (checked by the engine)."""
    return int(value) if value.isdigit() else value


def _done(action: str, poller: str, partition: str, **extra: Any) -> tuple[dict[str, Any], str]:
    data = {"ok": True, "action": action, "poller": poller, "partition": partition, **extra}
    return data, f"{action}: {_key_name(poller, partition)}"


# --- reporting -------------------------------------------------------------------------------


@cli.command()
@_target_options
def inspect(app: str | None, store_url: str | None, as_json: bool) -> None:
    """Show every key: cursor, lag, circuit, interval, outbox, parked, items, lease.

    With --json, every duration is in milliseconds (keys ending in _ms, like lag_ms and
    interval_ms) and every time in epoch milliseconds (keys ending in _at or _until).
    """

    async def work(target: Target) -> dict[str, Any]:
        return await target.operator.inspect()

    report = _run(_on_target("inspect", app, store_url, work))
    from ._render import inspect_view

    _emit(as_json, report, inspect_view(report))


@cli.command()
@click.option("--json", "as_json", is_flag=True, help='Print {"version": ...}.')
def version(as_json: bool) -> None:
    """Print the version."""
    _emit(as_json, {"version": _version()}, f"watukuy {_version()}")


# --- running -----------------------------------------------------------------------------


@cli.command()
@_target_options
@click.option(
    "--max-duration",
    metavar="DURATION",
    help="Deadline for the pass, e.g. 50s or 50 (seconds); keys still behind then are pending.",
)
@click.option("--only", multiple=True, metavar="NAME", help="Tick only this poller (repeatable).")
def tick(
    app: str | None,
    store_url: str | None,
    as_json: bool,
    max_duration: str | None,
    only: Sequence[str],
) -> None:
    """One pass over every due key, then exit (for cron and serverless).

    FILE is a configuration file describing the pollers (pollers.toml), the same as
    --app FILE.
    """
    _duration(max_duration, "--max-duration")

    async def work(target: Target) -> dict[str, Any]:
        assert target.engine is not None
        engine = target.engine
        console = _console()
        names = list(dict.fromkeys(only)) or list(engine.pollers)
        for name in names:
            if name not in engine.pollers:
                known = ", ".join(sorted(engine.pollers))
                raise CliError(f"--only: unknown poller {name!r} (the application has: {known})")
        from ._progress import tick_with_progress

        return await tick_with_progress(
            engine, names, max_duration, console=console, show=not as_json and console.is_terminal
        )

    result = _run(_on_target("tick", app, store_url, work, need_engine=True))
    from ._render import tick_view

    _emit(as_json, result, tick_view(result))
    # A throttled cycle is the API asking for time, not a failure: it does not fail the run.
    if any(row.get("error") and not row.get("throttled") for row in result["polled"]):
        raise click.exceptions.Exit(1)


@cli.command()
@_target_options
@click.option(
    "--refresh", default="1s", show_default=True, metavar="DURATION", help="Status refresh."
)
@click.option(
    "--stop-timeout",
    default="30s",
    show_default=True,
    metavar="DURATION",
    help="How long to drain in-flight work on SIGINT/SIGTERM.",
)
def run(
    app: str | None,
    store_url: str | None,
    as_json: bool,
    refresh: str,
    stop_timeout: str,
) -> None:
    """Run the daemon until SIGINT/SIGTERM, with a live status view.

    FILE is a configuration file describing the pollers and where their events go
    (pollers.toml), the same as --app FILE: watukuy run pollers.toml.
    """
    refresh_ms = parse_duration(refresh, "--refresh")
    if refresh_ms <= 0:
        raise CliError(f"--refresh: must be greater than zero, got {refresh!r}")
    _duration(stop_timeout, "--stop-timeout")

    def emit(report: dict[str, Any]) -> None:
        click.echo(wkjson.dumps(wkjson.to_jsonable(report)), err=_stdout_taken())

    async def work(target: Target) -> dict[str, Any]:
        assert target.engine is not None
        from ._progress import run_live

        return await run_live(
            target.engine,
            console=_console(),
            refresh_s=refresh_ms / 1000,
            stop_timeout=stop_timeout,
            emit_json=emit if as_json else None,
        )

    report = _run(_on_target("run", app, store_url, work, need_engine=True))
    if as_json:
        emit(report)  # the final state, after the drain
    else:
        from ._render import inspect_view

        console = _console()
        console.print(inspect_view(report))
        console.print("stopped")


# --- key operations -------------------------------------------------------------------------


def _key_command(action: str, help_text: str) -> click.Command:
    @_target_options
    @_key_options
    def command(
        app: str | None,
        store_url: str | None,
        as_json: bool,
        poller: str,
        partition: str | None,
    ) -> None:
        async def work(target: Target) -> tuple[dict[str, Any], str]:
            operate = getattr(target.operator, action)
            key = await operate(poller, partition)
            return _done(f"{action}d" if action.endswith("e") else f"{action}ed", *_key(key))

        data, line = _run(_on_target(action, app, store_url, work))
        _emit(as_json, data, line)

    command.__doc__ = help_text
    return cli.command(name=action, help=help_text)(command)


def _key(key: Any) -> tuple[str, str]:
    return str(key.poller), str(key.partition)


_key_command("trigger", "Poll a key now (clears Retry-After; an open circuit gets a probe).")
_key_command("pause", "Pause a key: no polling and no delivery until resumed.")
_key_command("resume", "Resume a paused key and make it due now.")


@cli.command()
@_target_options
@_key_options
@click.option(
    "--from",
    "from_",
    required=True,
    metavar="CURSOR",
    help="The API's own raw cursor to start from, or null for the beginning.",
)
@click.option("--to", metavar="CURSOR", help="Raw cursor to stop at (default: the live cursor).")
@click.option("--force", is_flag=True, help="Re-emit items already known, as updated.")
@click.option(
    "--wait/--no-wait",
    default=True,
    show_default=True,
    help="Run the lane to completion here (or just start it for the daemon).",
)
def backfill(
    app: str | None,
    store_url: str | None,
    as_json: bool,
    poller: str,
    partition: str | None,
    from_: str,
    to: str | None,
    force: bool,
    wait: bool,
) -> None:
    """Start a backfill lane and, by default, run it to completion with a progress bar."""
    console = _console()

    async def work(target: Target) -> dict[str, Any]:
        engine = target.engine
        assert engine is not None
        operator = target.operator
        from ._operators import EngineOperator

        assert isinstance(operator, EngineOperator)
        key = operator.key(poller, partition)
        await engine.backfill(
            poller, _raw_cursor(from_), _raw_cursor(to), force=force, partition=partition
        )
        if not wait:
            return {"ok": True, "action": "backfill started", **_named(key)}
        from ._progress import drive_backfill

        outcome = await drive_backfill(
            engine, key, console=console, show=not as_json and console.is_terminal
        )
        return {"ok": outcome.error is None, "action": "backfill", **outcome.to_dict()}

    data = _run(_on_target("backfill", app, store_url, work, need_engine=True))
    from rich.text import Text

    if "cycles" in data:
        error = data.get("error")
        human = Text(
            f"backfill {_key_name(data['poller'], data['partition'])}: {data['cycles']} "
            f"cycles, {data['items']} items, {data['events']} events"
            + (", done" if data.get("done") else "")
            + (f"; failed: {error.get('message')}" if error else "")
        )
    else:
        human = Text(f"backfill started: {_key_name(data['poller'], data['partition'])}")
    _emit(as_json, data, human)
    if data.get("error"):
        raise click.exceptions.Exit(1)


def _named(key: Any) -> dict[str, str]:
    return {"poller": str(key.poller), "partition": str(key.partition)}


@cli.command()
@_target_options
@_key_options
@click.option("--from", "from_", required=True, metavar="TIME", help="ISO 8601 time or epoch ms.")
@click.option("--to", metavar="TIME", help="ISO 8601 time or epoch ms (default: now).")
def replay(
    app: str | None,
    store_url: str | None,
    as_json: bool,
    poller: str,
    partition: str | None,
    from_: str,
    to: str | None,
) -> None:
    """Copy logged events of a time range back into the outbox, with their original ids."""

    async def work(target: Target) -> dict[str, Any]:
        engine = target.engine
        assert engine is not None
        operator = target.operator
        from ._operators import EngineOperator

        assert isinstance(operator, EngineOperator)
        key = operator.key(poller, partition)
        result = await engine.replay(
            poller, _time_arg(from_), None if to is None else _time_arg(to), partition=partition
        )
        return {"ok": True, "action": "replay", **_named(key), **result.to_dict()}

    data = _run(_on_target("replay", app, store_url, work, need_engine=True))
    _emit(
        as_json,
        data,
        f"replay: {data['replayed']} events of {_key_name(data['poller'], data['partition'])} "
        "queued for delivery",
    )


@cli.command(name="reset-cursor")
@_target_options
@_key_options
@click.option(
    "--to",
    required=True,
    metavar="CURSOR",
    help="Raw cursor to rewind to, or null for the initial cursor (without --app: the "
    "stored JSON form, see 'watukuy inspect --json').",
)
@click.option(
    "--clear-snapshot", is_flag=True, help="Also forget every item (all re-emitted as created)."
)
def reset_cursor(
    app: str | None,
    store_url: str | None,
    as_json: bool,
    poller: str,
    partition: str | None,
    to: str,
    clear_snapshot: bool,
) -> None:
    """Rewind the live cursor of a key (and optionally its snapshot)."""

    async def work(target: Target) -> tuple[dict[str, Any], str]:
        key = await target.operator.reset_cursor(
            poller, _raw_cursor(to), clear_snapshot=clear_snapshot, partition=partition
        )
        return _done("cursor reset", *_key(key), to=_raw_cursor(to), clear_snapshot=clear_snapshot)

    data, line = _run(_on_target("reset-cursor", app, store_url, work))
    _emit(as_json, data, line)


# --- parked -----------------------------------------------------------------------------------


@cli.group()
def parked() -> None:
    """Poison events and quarantined items: ls, retry, discard."""


def _parked_json(row: ParkedRow) -> dict[str, Any]:
    def parse(text: str | None) -> Any:
        if text is None:
            return None
        try:
            return wkjson.loads(text)
        except ValueError:
            return text

    return {
        "id": row.id,
        "kind": row.kind,
        "attempts": row.attempts,
        "parked_at": row.parked_at,
        "hold_key": row.hold_key,
        "sequence": row.sequence,
        "error": dict(row.error),
        "event": parse(row.event),
        "item": parse(row.item),
    }


@parked.command(name="ls")
@_target_options
@_key_options
@click.option("--kind", type=click.Choice(["poison", "invalid"]), help="Only this kind.")
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="At most N rows.")
def parked_ls(
    app: str | None,
    store_url: str | None,
    as_json: bool,
    poller: str,
    partition: str | None,
    kind: ParkedKind | None,
    limit: int | None,
) -> None:
    """List parked rows, oldest first."""

    async def work(target: Target) -> list[dict[str, Any]]:
        rows = await target.operator.parked_list(
            poller, partition=partition, kind=kind, limit=limit
        )
        return [_parked_json(row) for row in rows]

    rows = _run(_on_target("parked ls", app, store_url, work))
    from ._render import parked_table

    _emit(as_json, rows, parked_table(rows))


def _split_ids(raw: str) -> list[str]:
    ids = [part.strip() for part in raw.split(",") if part.strip()]
    if not ids:
        raise CliError(f"--ids: expected comma-separated ids (or unique prefixes), got {raw!r}")
    return ids


def resolve_ids(wanted: Sequence[str], known: Sequence[str]) -> list[str]:
    """Full ids for ``wanted`` ids or unique prefixes (at least 4 characters).

    Raises:
        CliError: A prefix matches no parked row, or more than one.
    """
    resolved: list[str] = []
    for prefix in wanted:
        matches = [full for full in known if full.startswith(prefix)]
        if len(prefix) < 4 and prefix not in known:
            raise CliError(f"--ids: {prefix!r} is too short; give at least 4 characters")
        if not matches:
            raise CliError(f"--ids: no parked row has an id starting with {prefix!r}")
        if len(matches) > 1 and prefix not in known:
            raise CliError(f"--ids: {prefix!r} matches {len(matches)} parked rows; give more")
        resolved.append(prefix if prefix in known else matches[0])
    return list(dict.fromkeys(resolved))


def _check_retryable(rows: Sequence[ParkedRow]) -> None:
    """Only poison events go back to the outbox; say why for anything else.

    Raises:
        CliError: A row is a quarantined item (kind ``invalid``).
    """
    invalid = [row.id for row in rows if row.kind != "poison"]
    if invalid:
        shown = ", ".join(row_id[:12] for row_id in invalid)
        raise CliError(
            f"--ids: {shown} {'is a quarantined item' if len(invalid) == 1 else 'are quarantined items'} "
            "(kind invalid), not a poison event: it never became an event, so there is "
            "nothing to retry. Fix the schema (or bump schema_version) and the next poll "
            "reads the item again; parked discard drops it. Nothing was changed."
        )


def _parked_change(action: str) -> click.Command:
    @_target_options
    @_key_options
    @click.option(
        "--ids", required=True, metavar="ID,ID", help="Parked ids, or unique prefixes of them."
    )
    def command(
        app: str | None,
        store_url: str | None,
        as_json: bool,
        poller: str,
        partition: str | None,
        ids: str,
    ) -> None:
        wanted = _split_ids(ids)

        async def work(target: Target) -> dict[str, Any]:
            operator = target.operator
            rows = await operator.parked_list(poller, partition=partition, kind=None, limit=None)
            full = resolve_ids(wanted, [row.id for row in rows])
            if action == "retry":
                _check_retryable([row for row in rows if row.id in full])
                count = await operator.parked_retry(poller, full, partition=partition)
                if count < len(full):
                    raise CliError(
                        f"{len(full) - count} of {len(full)} parked row(s) could not be moved "
                        "back (another process retried or discarded them meanwhile); run "
                        "parked ls to see what is left",
                        exit_code=1,
                    )
            else:
                count = await operator.parked_discard(poller, full, partition=partition)
            return {
                "ok": True,
                "action": action,
                "poller": poller,
                "partition": partition or "",
                "ids": full,
                "count": count,
            }

        data = _run(_on_target(f"parked {action}", app, store_url, work))
        verb = "moved back to the outbox" if action == "retry" else "discarded"
        _emit(
            as_json,
            data,
            f"{data['count']} parked row(s) of {_key_name(poller, partition or '')} {verb}",
        )

    helps = {
        "retry": "Send parked poison events back to the outbox (their held keys flow again).",
        "discard": "Drop parked rows for good.",
    }
    return parked.command(name=action, help=helps[action])(command)


_parked_change("retry")
_parked_change("discard")


# --- held deletes -------------------------------------------------------------------------


@cli.group()
def deletes() -> None:
    """Deletes held back by the mass-delete guard: show, confirm or discard them."""


def _deletes_command(action: str, help_text: str) -> click.Command:
    @_target_options
    @_key_options
    def command(
        app: str | None,
        store_url: str | None,
        as_json: bool,
        poller: str,
        partition: str | None,
    ) -> None:
        async def work(target: Target) -> dict[str, Any]:
            operator = target.operator
            data: dict[str, Any] = {
                "ok": True,
                "action": action,
                "poller": poller,
                "partition": partition or "",
            }
            if action == "show":
                held = await operator.deletes_held(poller, partition=partition)
                from watukuy.model.rows import held_deletes_to_json

                data["held"] = held_deletes_to_json(held)
            elif action == "confirm":
                data["count"] = await operator.deletes_confirm(poller, partition=partition)
            else:
                data["count"] = await operator.deletes_discard(poller, partition=partition)
            return data

        data = _run(_on_target(f"deletes {action}", app, store_url, work))
        name = _key_name(poller, partition or "")
        if action == "show":
            held = data["held"]
            line = (
                f"{name}: no deletes held"
                if held is None
                else f"{name}: {held['count']} delete(s) of {held['snapshot']} held since "
                f"{held['held_at']} ({held['passes']} pass(es); "
                f"{'confirmed' if held['confirmed'] else 'waiting for an operator'})"
            )
        elif action == "confirm":
            line = f"{data['count']} held delete(s) of {name} confirmed; the next run emits them"
        else:
            line = f"{data['count']} held delete(s) of {name} discarded"
        _emit(as_json, data, line)

    return deletes.command(name=action, help=help_text)(command)


_deletes_command("show", "Show the deletes held for a key.")
_deletes_command("confirm", "Confirm held deletes: the key's next run emits them.")
_deletes_command("discard", "Drop held deletes: nothing is emitted.")


# --- schema ---------------------------------------------------------------------------------


@cli.command()
@_target_options
def migrate(app: str | None, store_url: str | None, as_json: bool) -> None:
    """Create or upgrade the store's tables (idempotent)."""

    async def work(target: Target) -> dict[str, Any]:
        # open_target(create=True) has just run the migration as its probe.
        return {"ok": True, "action": "migrated", "store": target.label}

    data = _run(_on_target("migrate", app, store_url, work, create=True))
    _emit(as_json, data, f"migrated {data['store']}")

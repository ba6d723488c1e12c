"""``watukuy demo``: the click command (loaded by the ``watukuy`` CLI on demand)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click
from rich.console import Console

from watukuy.model.durations import parse_duration

from ._output import DemoOutput, JsonOutput, LiveOutput, PlainOutput
from ._run import DemoOptions, DemoPaths, run_demo

__all__ = ["MAX_WIDTH", "demo"]

MAX_WIDTH = 100
"""Columns the demo's output fits in, however wide the terminal."""


def _show_code(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from . import _pollers

    path = Path(_pollers.__file__)
    click.echo(f"# The demo's pollers: {path}\n")
    click.echo(path.read_text(encoding="utf-8"), nl=False)
    ctx.exit(0)


@click.command()
@click.option(
    "--db",
    default="watukuy-demo.db",
    show_default=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The engine's SQLite store (the vendor journal, consumer log and lock sit next to it).",
)
@click.option(
    "--consumer-log",
    type=click.Path(dir_okay=False, path_type=Path),
    help="SQLite file of delivered events, keyed by event id [default: <db>.consumer.db].",
)
@click.option(
    "--seed", default=7, show_default=True, type=int, help="Seed of the vendor's changes."
)
@click.option("--duration", metavar="DURATION", help="Stop after this long, e.g. 30s.")
@click.option(
    "--mutate-every",
    default="1s",
    show_default=True,
    metavar="DURATION",
    help="Time between two steps of change at the vendor.",
)
@click.option(
    "--mutations",
    type=click.IntRange(min=0),
    metavar="N",
    help="Stop changing the vendor after N steps in total, across restarts.",
)
@click.option("--port", default=0, type=click.IntRange(0, 65535), help="Vendor API port (0: any).")
@click.option("--reset", is_flag=True, help="Delete the demo's files and start over.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line (kind=event...).")
@click.option("--no-ui", is_flag=True, help="Plain lines instead of the live table.")
@click.option(
    "--show-code",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_code,
    help="Print the demo's poller code (define_poller and fetch) and where it lives, then exit.",
)
def demo(
    db: Path,
    consumer_log: Path | None,
    seed: int,
    duration: str | None,
    mutate_every: str,
    mutations: int | None,
    port: int,
    reset: bool,
    as_json: bool,
    no_ui: bool,
) -> None:
    """Poll a simulated vendor API into ./watukuy-demo.db and show the events.

    A vendor API on 127.0.0.1 serves orders (timestamp cursor + reconcile), a catalog
    (snapshot diff) and per-tenant invoices (token cursor), with rate-limit headers, ETags
    and the odd 429 or 503, and changes its data over time. Stop it any way you like,
    even with kill -9: the next run resumes where it was and shows what it picked up.
    The pollers are ordinary watukuy code: watukuy demo --show-code prints them.
    """
    duration_ms = None if duration is None else parse_duration(duration, "--duration")
    every_ms = parse_duration(mutate_every, "--mutate-every")
    if every_ms <= 0:
        raise click.BadParameter("must be greater than zero", param_hint="--mutate-every")
    options = DemoOptions(
        paths=DemoPaths.for_db(db, consumer_log),
        seed=seed,
        duration_ms=duration_ms,
        mutate_every_ms=every_ms,
        mutations=mutations,
        port=port,
        reset=reset,
    )
    output: DemoOutput
    console = Console(highlight=False)
    # At most MAX_WIDTH columns on a terminal; exactly that in a pipe or a file.
    console.width = min(console.width, MAX_WIDTH) if console.is_terminal else MAX_WIDTH
    if as_json:
        output = JsonOutput(sys.stdout)
    elif no_ui or not console.is_terminal:
        output = PlainOutput(console)
    else:
        output = LiveOutput(console)
    try:
        summary = asyncio.run(run_demo(options, output))
        output.stopped(summary)
    finally:
        output.close()

"""One engine in its own process, polling a real vendor with one recipe.

Run as a script by any interpreter that has ``watukuy`` installed (so the same scenario
can be run against another checkout: ``--python /path/to/.venv/bin/python`` in
:mod:`.scenario`). It imports only the public ``watukuy`` API, the standard library,
:mod:`recipes` and :mod:`toml_recipes` (from its own folder); a recipe named ``toml-*`` is
a poller loaded from a TOML file (``watukuy.rest.load_config``), run the same way.

What it lives through goes into a journal (a SQLite file shared by every process of one
recipe, WAL): each delivery (written by the handler before the engine acks it), each
lane cycle's end and each error. On stdout it prints ``ready`` once started, then
``stopped`` after a SIGTERM (a graceful ``stop()``). The parent kills it with SIGKILL.

``--tick`` runs the engine in ``tick()`` mode instead, driven by stdin: each line
``tick`` triggers the poller and runs one ``tick(catch_up=False)`` (one cycle: the scripted
scenarios change the vendor between the cycles of a pass), then prints ``ticked <errors>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import recipes
import toml_recipes

import watukuy as wk

JOURNAL = """
CREATE TABLE IF NOT EXISTS deliveries (n INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT,
    type TEXT, subject TEXT, lane TEXT, data TEXT, instance TEXT, at REAL);
CREATE TABLE IF NOT EXISTS polls (n INTEGER PRIMARY KEY AUTOINCREMENT, lane TEXT,
    started REAL, ended REAL, pages INTEGER, items INTEGER, events INTEGER,
    truncated INTEGER, instance TEXT);
CREATE TABLE IF NOT EXISTS errors (n INTEGER PRIMARY KEY AUTOINCREMENT, lane TEXT,
    phase TEXT, message TEXT, instance TEXT, at REAL);
"""


def say(line: str) -> None:
    print(line, flush=True)


class Journal:
    """The handler and the hooks: every delivery, cycle and error, one committed row each."""

    def __init__(self, path: str, instance: str) -> None:
        self._db = sqlite3.connect(path, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(JOURNAL)
        self._instance = instance

    async def handle(self, event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        self._db.execute(
            "INSERT INTO deliveries (event_id, type, subject, lane, data, instance, at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                event.id,
                event.type,
                event.subject,
                event.lane,
                json.dumps(event.data),
                self._instance,
                time.time(),
            ),
        )

    def on_poll_end(self, details: Any) -> None:
        summary = details.summary
        self._db.execute(
            "INSERT INTO polls (lane, started, ended, pages, items, events, truncated, instance) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                summary.lane,
                summary.started_at / 1000,
                time.time(),
                summary.pages,
                summary.items,
                _total(summary.events),
                int(summary.truncated),
                self._instance,
            ),
        )

    def on_error(self, details: Any) -> None:
        self._db.execute(
            "INSERT INTO errors (lane, phase, message, instance, at) VALUES (?, ?, ?, ?, ?)",
            (
                details.lane,
                details.phase,
                str(details.error.get("message")),
                self._instance,
                time.time(),
            ),
        )


def _total(counts: Any) -> int:
    return sum(int(getattr(counts, name, 0)) for name in ("created", "updated", "deleted"))


def _store(args: argparse.Namespace) -> Any:
    if args.sqlite:
        return wk.SqliteStore(args.sqlite)
    return wk.PostgresStore(args.postgres, schema=args.schema)


async def main(args: argparse.Namespace) -> None:
    knobs = json.loads(args.knobs)
    build = toml_recipes.build if toml_recipes.is_toml(args.recipe) else recipes.build
    poller = build(args.vendor, args.recipe, args.base_url, **knobs)
    journal = Journal(args.journal, args.instance)
    store = _store(args)
    engine = wk.Engine(
        store=store,
        pollers=[poller],
        instance_id=args.instance,
        hooks=journal,
        # A SIGKILLed engine leaves its lease behind; the next process takes the key once
        # it expires.
        lease=wk.LeaseOptions(ttl=args.lease_ttl),
    )
    engine.on(poller, journal.handle)
    if args.tick:
        await run_ticks(engine, poller.name)
    else:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await engine.start()
        say("ready")
        await stop.wait()
        await engine.stop(drain=True, timeout="10s")
    await store.close()
    say("stopped")


async def run_ticks(engine: wk.Engine, name: str) -> None:
    loop = asyncio.get_running_loop()
    say("ready")
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line or line.strip() == "quit":
            break
        await engine.trigger(name)
        result = await engine.tick(catch_up=False)
        errors = [str((failed.error or {}).get("message")) for failed in result.errors]
        say(f"ticked {json.dumps(errors)}")
    await engine.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--instance", required=True)
    parser.add_argument("--vendor", choices=("drf", "json"), required=True)
    parser.add_argument("--recipe", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--journal", required=True)
    parser.add_argument("--sqlite")
    parser.add_argument("--postgres")
    parser.add_argument("--schema", default="public")
    parser.add_argument("--lease-ttl", default="5s")
    parser.add_argument("--knobs", default="{}")
    parser.add_argument("--tick", action="store_true")
    asyncio.run(main(parser.parse_args()))

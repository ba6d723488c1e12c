"""Effects exactly once: an idempotency table in the consumer's own database.

watukuy delivers every event at least once: a crash after your handler's effect and before
the engine's ack delivers the event again. The inbox makes that redelivery harmless. It
records the event's id in the same transaction as your effect, so either both are committed
or neither is, and a redelivered event finds its id and is skipped::

    from watukuy.inbox import Inbox

    inbox = Inbox()                      # table "watukuy_inbox", ids kept 30 days
    inbox.migrate(db)                    # once, at start-up

    def on_order(event, ctx):
        with db:                         # your transaction: commits both writes
            with inbox.once(db, event) as fresh:
                if fresh:
                    db.execute("UPDATE totals SET n = n + 1")

It works on SQLite (``sqlite3``, ``aiosqlite``), PostgreSQL through psycopg 3 (connections
and pools, sync and asyncio) and SQLAlchemy 2 (sessions, connections, engines and session
factories, sync and asyncio); each driver is imported only when you hand the inbox one of
its objects, so this module needs none of them. ``once()`` is a context manager for a
blocking connection and an async one for an asyncio connection; ``migrate()`` and
``prune()`` return an awaitable for asyncio targets; :meth:`Inbox.handler` owns the
transaction for a pool or an engine.

The module's own ``once``, ``handler``, ``migrate`` and ``prune`` are those of
:data:`DEFAULT`, an ``Inbox()`` with the default table, so ``from watukuy import inbox`` and
then ``inbox.once(conn, event)`` reads the way the instance does.
"""

from __future__ import annotations

from typing import Final

from ._inbox import AsyncHandlerDecorator, Inbox, SyncHandlerDecorator
from ._sql import InboxEvent

__all__ = [
    "DEFAULT",
    "AsyncHandlerDecorator",
    "Inbox",
    "InboxEvent",
    "SyncHandlerDecorator",
    "handler",
    "migrate",
    "once",
    "prune",
]

DEFAULT: Final = Inbox()
"""The inbox behind the module-level functions: table ``watukuy_inbox``, ids kept 30 days."""

once = DEFAULT.once
"""``DEFAULT.once``: see :meth:`Inbox.once`."""
handler = DEFAULT.handler
"""``DEFAULT.handler``: see :meth:`Inbox.handler`."""
migrate = DEFAULT.migrate
"""``DEFAULT.migrate``: see :meth:`Inbox.migrate`."""
prune = DEFAULT.prune
"""``DEFAULT.prune``: see :meth:`Inbox.prune`."""

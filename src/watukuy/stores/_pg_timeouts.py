"""Time limits for every PostgreSQL call, and error messages that name the real cause.

Three limits apply to a :class:`~watukuy.stores.postgres.PostgresStore` that owns its pool
(set as arguments or as parameters of the DSN URL):

- ``connect_timeout`` (default 5 s): opening a connection (libpq's own limit), and waiting
  for one from the pool;
- ``statement_timeout`` (default 10 s) and ``lock_timeout`` (default 5 s): sent to the
  server for every connection (``SET statement_timeout`` / ``lock_timeout``), so a slow
  statement or a lock held too long is cancelled there;
- ``timeout`` (default ``connect_timeout + statement_timeout``): the client's own limit on
  one store call, whatever the server does. A server that stopped answering (frozen,
  partitioned away) cannot enforce its own limits, so when this one passes the connection's
  socket is shut down: the call fails at once with ``StoreError`` instead of waiting on a
  socket that will never speak again, and the pool replaces the connection.

When the pool cannot hand out a connection, the message says why: the store makes one
direct connection attempt (bounded by ``connect_timeout``) and reports its error ("Connection
refused", ``database "x" does not exist``, ``password authentication failed``) instead of
the pool's "couldn't get a connection after 5.00 sec".
"""

from __future__ import annotations

import asyncio
import math
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError, StoreError

__all__ = ["Guard", "PgTimeouts", "bounded", "diagnose", "split_dsn"]

TIMEOUT_PARAMETERS: Final = ("connect_timeout", "statement_timeout", "lock_timeout", "timeout")


def _duration(value: Duration | str, name: str) -> int:
    ms = parse_duration(value, name)  # a bare number in a URL is seconds, as in libpq
    if ms <= 0:
        raise ConfigError(f"must be greater than zero, got {value!r}", field=name)
    return ms


@dataclass(frozen=True, slots=True)
class PgTimeouts:
    """The limits of one store, in milliseconds (see the module docstring)."""

    connect_ms: int = 5_000
    statement_ms: int = 10_000
    lock_ms: int = 5_000
    call_ms: int = 15_000

    @classmethod
    def of(
        cls,
        connect_timeout: Duration | str,
        statement_timeout: Duration | str,
        lock_timeout: Duration | str,
        timeout: Duration | str | None,
    ) -> PgTimeouts:
        """Parse the four options; ``ConfigError`` names a bad one."""
        connect = _duration(connect_timeout, "connect_timeout")
        statement = _duration(statement_timeout, "statement_timeout")
        lock = _duration(lock_timeout, "lock_timeout")
        call = connect + statement if timeout is None else _duration(timeout, "timeout")
        return cls(connect, statement, lock, call)

    def server_options(self, existing: str | None) -> str:
        """The libpq ``options`` that set the server-side limits, after any given ones."""
        ours = f"-c statement_timeout={self.statement_ms} -c lock_timeout={self.lock_ms}"
        return f"{existing} {ours}" if existing else ours


def split_dsn(dsn: str) -> tuple[str, dict[str, str]]:
    """Take watukuy's timeout parameters out of a URL DSN (libpq would refuse them).

    Returns:
        The DSN without them, and their values by name. A ``key=value`` DSN is returned
        as it is (its ``connect_timeout`` is libpq's own).
    """
    if "://" not in dsn:
        return dsn, {}
    parts = urlsplit(dsn)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    ours = {name: value for name, value in pairs if name in TIMEOUT_PARAMETERS}
    rest = [(name, value) for name, value in pairs if name not in TIMEOUT_PARAMETERS]
    return urlunsplit(parts._replace(query=urlencode(rest))), ours


def connect_seconds(timeouts: PgTimeouts) -> int:
    """libpq's ``connect_timeout`` is whole seconds (and 1 means 2): at least 2."""
    return max(2, math.ceil(timeouts.connect_ms / 1_000))


@dataclass(slots=True)
class Guard:
    """What the time limit of one call knows: the connection in use, and whether it expired."""

    conn: Any = None
    expired: bool = False


def _shut_down(conn: Any) -> None:
    """Wake every wait on the connection's socket with an end of file.

    ``shutdown`` acts on the connection, not the descriptor: done on a duplicate, it leaves
    the driver's descriptor valid (no other socket can take its number while the driver's
    event loop still watches it) and the driver fails at once, without first trying to
    cancel the query on a server that does not answer.
    """
    try:
        fd = conn.pgconn.socket
    except Exception:  # already closed
        return
    try:
        dup = socket.socket(fileno=socket.dup(fd))
    except OSError:
        return
    try:
        dup.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        dup.close()


@asynccontextmanager
async def bounded(what: str, timeouts: PgTimeouts) -> AsyncIterator[Guard]:
    """Bound one store call by ``timeouts.call_ms``.

    Set ``guard.conn`` once a connection is in hand. When the limit passes, that
    connection's socket is shut down (the call fails with the driver's error, turned into
    ``StoreError`` by the caller: see :func:`expired_error`); without a connection yet the
    task is cancelled and a ``StoreError`` raised here.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    guard = Guard()

    def expire() -> None:
        guard.expired = True
        if guard.conn is not None:
            _shut_down(guard.conn)
        elif task is not None:
            task.cancel()

    handle = loop.call_later(timeouts.call_ms / 1_000, expire)
    try:
        yield guard
    except asyncio.CancelledError:
        if guard.expired and guard.conn is None and task is not None and task.uncancel() == 0:
            raise StoreError(
                f"{what}: no connection from PostgreSQL within {timeouts.call_ms / 1_000:g} s"
            ) from None
        raise
    finally:
        handle.cancel()


def expired_error(what: str, timeouts: PgTimeouts, error: BaseException) -> StoreError:
    """The error of a call whose connection was shut down by its time limit."""
    del error
    return StoreError(
        f"{what}: PostgreSQL did not answer within {timeouts.call_ms / 1_000:g} s "
        "(the connection was closed)"
    )


async def diagnose(conninfo: str, timeouts: PgTimeouts) -> str | None:
    """Why no connection can be made: one direct attempt, its error message (first line
    of each part), or ``None`` when it connects (or does not answer either)."""
    import psycopg

    try:
        async with asyncio.timeout(timeouts.connect_ms / 1_000 + 1):
            conn = await psycopg.AsyncConnection.connect(
                conninfo, connect_timeout=connect_seconds(timeouts)
            )
    except TimeoutError:
        return None
    except Exception as error:
        return " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    await conn.close()
    return None

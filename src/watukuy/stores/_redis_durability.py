"""Does the Redis server behind a ``RedisStore`` keep its data across a restart?

A Redis server without AOF and without RDB snapshots forgets everything when it restarts:
leases, cursors, snapshots, the outbox. watukuy's promises (at-least-once, per-key order)
then hold only until the next restart, so :class:`~watukuy.stores.redis.RedisStore` asks
the server once, when it is migrated, and logs a WARNING if it persists nothing. Managed
services often refuse ``CONFIG``; the store then says nothing.
"""

from __future__ import annotations

import logging
from typing import Any, Final

__all__ = ["persistence_warning", "warn_if_not_persistent"]

_log = logging.getLogger("watukuy")
# One warning per server per process: every store and every engine on it would repeat it.
_warned: Final[set[str]] = set()


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _setting(reply: object, name: str) -> str | None:
    if not isinstance(reply, dict):
        return None
    for key, value in reply.items():
        if _text(key).lower() == name:
            return _text(value)
    return None


def _address(client: Any) -> str:
    try:
        kwargs = client.connection_pool.connection_kwargs
        return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"
    except AttributeError:
        return repr(type(client).__name__)


async def persistence_warning(client: Any) -> str | None:
    """The warning to log when the server persists nothing; ``None`` when it does, or when
    it does not say (``CONFIG`` refused or unknown)."""
    try:
        appendonly = _setting(await client.config_get("appendonly"), "appendonly")
        save = _setting(await client.config_get("save"), "save")
    except Exception:  # NOPERM, unknown command, a proxy: the server keeps its secret
        return None
    if appendonly is None or save is None:
        return None
    if appendonly.lower() == "yes" or save.strip():
        return None
    return (
        f"RedisStore: the Redis server at {_address(client)} persists nothing "
        '(appendonly no, save ""): a restart of the server loses every lease, cursor, '
        "snapshot and outbox event. Turn on AOF (appendonly yes) or RDB snapshots "
        "(save 60 1000); see https://watukuy.readthedocs.io/en/latest/stores/#redisstore"
    )


async def warn_if_not_persistent(client: Any) -> bool:
    """Log :func:`persistence_warning` once per server and process; True when it did."""
    address = _address(client)
    if address in _warned:
        return False
    warning = await persistence_warning(client)
    if warning is None:
        return False
    _warned.add(address)
    _log.warning(warning)
    return True

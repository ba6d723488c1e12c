"""The small core every connection kind shares: the table, its SQL, the row of an event.

The table (``watukuy_inbox`` unless configured) holds one row per applied event::

    poller         TEXT    the event's poller        } primary key: an id is unique per
    event_id       TEXT    the event's id            } poller even if two share a source
    partition_key  TEXT    the event's partition (for reading only)
    event_time     BIGINT  the event's observation time, epoch milliseconds (pruning)
    applied_at     BIGINT  when the row was written, epoch milliseconds

"Insert the id, did it exist?" is one ``INSERT ... ON CONFLICT DO NOTHING``: its row count
is 1 for a fresh event and 0 for one already applied. Both PostgreSQL and SQLite (3.24 and
later) speak that statement; the dialects differ in column types, placeholders and the lock
that serialises concurrent migrations.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, Protocol

from watukuy.model.errors import ConfigError

__all__ = [
    "Dialect",
    "InboxEvent",
    "Placeholders",
    "Statements",
    "event_row",
    "validate_table",
]

Dialect = Literal["sqlite", "postgresql"]
Placeholders = Literal["qmark", "format", "named"]

# Letters, digits and underscores, starting with a letter or underscore; short enough that
# the index name (the table name plus "_event_time") fits PostgreSQL's 63 bytes.
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,47}$")
SAVEPOINT = "watukuy_inbox"


class InboxEvent(Protocol):
    """What the inbox reads from an event; :class:`watukuy.Event` has it all."""

    @property
    def id(self) -> str:
        """The event id (the same for every delivery of one observation)."""
        ...

    @property
    def poller(self) -> str:
        """The poller's name."""
        ...

    @property
    def partition(self) -> str:
        """The partition key (``""`` for single-partition pollers)."""
        ...

    @property
    def time(self) -> str:
        """The observation time, ISO 8601."""
        ...


def validate_table(name: str) -> str:
    """``name`` itself when it is a plain SQL identifier of at most 48 characters.

    Raises:
        ConfigError: Anything else (no quoting, no schema prefix, no spaces).
    """
    if not isinstance(name, str) or _IDENTIFIER.match(name) is None:
        raise ConfigError(
            "expected letters, digits and underscores (at most 48, not starting with a "
            f"digit), got {name!r}",
            field="table",
        )
    return name


def epoch_ms(moment: datetime) -> int:
    """``moment`` (naive means UTC) as integer epoch milliseconds."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def now_ms() -> int:
    """The wall clock, epoch milliseconds (the inbox lives at the edge, with the driver)."""
    return epoch_ms(datetime.now(UTC))


def event_row(event: InboxEvent, applied_at: int) -> tuple[str, str, str, int, int]:
    """The values of the inbox row of ``event``, in the order of :attr:`Statements.insert`.

    Raises:
        ConfigError: The event's ``time`` is not an ISO 8601 timestamp.
    """
    try:
        event_time = epoch_ms(datetime.fromisoformat(event.time))
    except (TypeError, ValueError) as error:
        raise ConfigError(
            f"expected an ISO 8601 time, got {event.time!r}", field="event.time"
        ) from error
    return (event.poller, event.id, event.partition, event_time, applied_at)


def _marks(style: Placeholders, count: int) -> list[str]:
    if style == "qmark":
        return ["?"] * count
    if style == "format":
        return ["%s"] * count
    return [f":p{n}" for n in range(count)]


def named(params: Sequence[object]) -> dict[str, object]:
    """Positional parameters as the ``:p0, :p1, ...`` dictionary of the named style."""
    return {f"p{n}": value for n, value in enumerate(params)}


@dataclass(frozen=True, slots=True)
class Statements:
    """The SQL of one inbox table in one dialect and placeholder style."""

    dialect: Dialect
    table: str
    create: tuple[str, ...]
    lock: str | None
    lock_params: tuple[object, ...]
    insert: str
    prune: str

    @classmethod
    def build(cls, dialect: Dialect, table: str, style: Placeholders) -> Statements:
        """The statements for ``table`` (already validated) in ``dialect``."""
        quoted = f'"{table}"'
        integer = "INTEGER" if dialect == "sqlite" else "BIGINT"
        create_table = (
            f"CREATE TABLE IF NOT EXISTS {quoted} ("
            "poller TEXT NOT NULL, "
            "event_id TEXT NOT NULL, "
            "partition_key TEXT NOT NULL, "
            f"event_time {integer} NOT NULL, "
            f"applied_at {integer} NOT NULL, "
            "PRIMARY KEY (poller, event_id))" + (" WITHOUT ROWID" if dialect == "sqlite" else "")
        )
        create_index = f'CREATE INDEX IF NOT EXISTS "{table}_event_time" ON {quoted} (event_time)'
        marks = _marks(style, 5)
        insert = (
            f"INSERT INTO {quoted} (poller, event_id, partition_key, event_time, applied_at) "
            f"VALUES ({', '.join(marks)}) ON CONFLICT (poller, event_id) DO NOTHING"
        )
        prune = f"DELETE FROM {quoted} WHERE event_time < {_marks(style, 1)[0]}"
        lock: str | None = None
        lock_params: tuple[object, ...] = ()
        if dialect == "postgresql":
            # Two processes creating the same table at once still collide on the catalog's
            # unique indexes despite IF NOT EXISTS: one transaction-scoped lock per table.
            digest = hashlib.sha256(f"watukuy:inbox:{table}".encode()).digest()
            lock = f"SELECT pg_advisory_xact_lock({_marks(style, 1)[0]})"
            lock_params = (int.from_bytes(digest[:8], "big", signed=True),)
        return cls(dialect, table, (create_table, create_index), lock, lock_params, insert, prune)

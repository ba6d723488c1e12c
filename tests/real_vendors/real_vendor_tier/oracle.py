"""What the vendor really did: every version, when it became visible, for how long.

For PostgreSQL the history is the vendor's own: :func:`install_audit` adds a constraint
trigger, ``DEFERRABLE INITIALLY DEFERRED``, so it fires at commit, after every statement
of the transaction, and records each written row (or its delete) with
``clock_timestamp()`` and the transaction id. The commit time of a transaction is the
latest timestamp its rows got; a row written twice in one transaction was visible only in
its last form. :func:`drf_history` reads that back.

For json-server the history is the writers' log (what each client sent, when it sent it,
and when json-server answered), with the server's db file for the final state:
:func:`json_history`. A write is visible from its answer on, and surely until the next
write of that order was sent, so visibility is measured from below.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

AUDIT_DDL = """
CREATE TABLE "{schema}".orders_audit (
    seq bigserial PRIMARY KEY,
    op text NOT NULL,
    id bigint NOT NULL,
    version integer,
    updated_at timestamptz,
    row jsonb,
    txid bigint NOT NULL DEFAULT txid_current(),
    committed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION "{schema}".orders_audit_at_commit() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO "{schema}".orders_audit (op, id, version, updated_at, row)
        VALUES ('DELETE', OLD.id, OLD.version, OLD.updated_at, NULL);
        RETURN OLD;
    END IF;
    INSERT INTO "{schema}".orders_audit (op, id, version, updated_at, row)
    VALUES (TG_OP, NEW.id, NEW.version, NEW.updated_at, to_jsonb(NEW));
    RETURN NEW;
END
$$;
CREATE CONSTRAINT TRIGGER orders_audit AFTER INSERT OR UPDATE OR DELETE ON "{schema}".orders
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION "{schema}".orders_audit_at_commit();
"""


def install_audit(dsn: str, schema: str) -> None:
    """Add the commit-time audit table and trigger to ``schema.orders``."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(AUDIT_DDL.format(schema=schema).encode())


def stamp_us(value: Any) -> int:
    """An ISO 8601 stamp (``...Z`` or with an offset), or a datetime, in epoch µs."""
    moment = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    delta = moment - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


VersionKey = tuple[int, int, int]
"""``(id, version, updated_at in epoch µs)``: one version of one order."""

Write = tuple[int, VersionKey, Mapping[str, Any] | None, float, float]
"""``(id, key, row or None for a delete, visible_from, began)`` of one write."""


@dataclass(frozen=True, slots=True)
class Version:
    """One state of one order at the vendor (``row is None``: deleted).

    Attributes:
        key: ``(id, version, stamp_us)``.
        visible_from: Epoch seconds from which readers surely saw it.
        visible_until: Epoch seconds until which they surely did (``None``: to the end).
        order: Its place in the order's history (0, 1, ...).
    """

    key: VersionKey
    row: Mapping[str, Any] | None
    visible_from: float
    visible_until: float | None
    order: int

    def visible_for(self, end: float) -> float:
        """Seconds it surely stayed visible, counting up to ``end`` if it still is."""
        until = end if self.visible_until is None else self.visible_until
        return until - self.visible_from

    @property
    def deleted(self) -> bool:
        """This state is the order's absence."""
        return self.row is None


@dataclass
class History:
    """Every order's versions, oldest first, and how late commits landed."""

    versions: dict[int, list[Version]] = field(default_factory=dict)
    lateness: list[float] = field(default_factory=list)
    """Per write: visible_from minus its stamp, in seconds (late commits)."""

    def final(self) -> dict[int, Version]:
        """Each order's last version (deleted ones included)."""
        return {identity: states[-1] for identity, states in self.versions.items()}

    def by_key(self) -> dict[VersionKey, Version]:
        """Every live version by its key."""
        return {
            state.key: state
            for states in self.versions.values()
            for state in states
            if not state.deleted
        }

    def version_collisions(self) -> list[int]:
        """Orders with two live states under one version number (a writer's bug: a poller
        comparing versions could not tell them apart)."""
        return [
            identity
            for identity, states in self.versions.items()
            if len({s.key[1] for s in states if not s.deleted})
            != sum(1 for s in states if not s.deleted)
        ]

    def count(self) -> int:
        """Versions in the history, deletes included."""
        return sum(len(states) for states in self.versions.values())


def _link(writes: Iterable[Write]) -> History:
    """A history from ``(id, key, row, visible_from, next_write_sent_or_same)`` rows.

    ``writes`` are in the order they became visible; each version stays visible until the
    next one of its order begins (the fourth field of that next one's row).
    """
    history = History()
    pending: dict[int, list[tuple[VersionKey, Mapping[str, Any] | None, float, float]]] = {}
    for identity, key, row, visible_from, began in writes:
        pending.setdefault(identity, []).append((key, row, visible_from, began))
    for identity, rows in pending.items():
        states: list[Version] = []
        for n, (key, row, visible_from, _) in enumerate(rows):
            until = rows[n + 1][3] if n + 1 < len(rows) else None
            states.append(Version(key, row, visible_from, until, n))
        history.versions[identity] = states
    return history


def drf_history(dsn: str, schema: str) -> History:
    """The audit table of ``schema`` as a history (commit times from the trigger)."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            f"SELECT seq, op, id, version, updated_at, row, txid, committed_at "
            f'FROM "{schema}".orders_audit ORDER BY seq'
        ).fetchall()
    committed: dict[int, float] = {}
    for _, _, _, _, _, _, txid, at in rows:
        committed[txid] = max(committed.get(txid, 0.0), at.timestamp())
    # A row written twice in one transaction was only ever visible in its last form.
    last: dict[tuple[int, int], tuple[Any, ...]] = {}
    for row in rows:
        last[(row[2], row[6])] = row
    ordered = sorted(last.values(), key=lambda row: (committed[row[6]], row[0]))
    writes: list[Write] = []
    lateness: list[float] = []
    for _, op, identity, version, updated_at, payload, txid, _ in ordered:
        at = committed[txid]
        stamp = stamp_us(updated_at)
        if op != "DELETE":
            lateness.append(at - stamp / 1e6)
        writes.append((identity, (identity, version, stamp), payload, at, at))
    history = _link(writes)
    history.lateness = lateness
    return history


@dataclass(frozen=True, slots=True)
class JsonWrite:
    """One write a json-server client made.

    Attributes:
        op: ``"put"``, ``"post"`` or ``"delete"``.
        order: The order as sent (for deletes, its id only).
        sent_at: When the request left (epoch seconds).
        answered_at: When json-server answered it.
        status: The HTTP status it answered.
    """

    op: str
    order: Mapping[str, Any]
    sent_at: float
    answered_at: float
    status: int


def json_history(
    initial: Iterable[Mapping[str, Any]], started: float, log: Iterable[JsonWrite]
) -> History:
    """The history of a json-server from its initial orders and the writers' log."""
    writes: list[Write] = []
    for order in initial:
        key = (order["id"], order["version"], stamp_us(order["updatedAt"]))
        writes.append((order["id"], key, order, started, started))
    lateness: list[float] = []
    for write in sorted(log, key=lambda entry: entry.answered_at):
        if not 200 <= write.status < 300:
            continue
        identity = write.order["id"]
        if write.op == "delete":
            writes.append((identity, (identity, -1, 0), None, write.answered_at, write.sent_at))
            continue
        stamp = stamp_us(write.order["updatedAt"])
        lateness.append(write.answered_at - stamp / 1e6)
        key = (identity, write.order["version"], stamp)
        writes.append((identity, key, write.order, write.answered_at, write.sent_at))
    history = _link(writes)
    history.lateness = lateness
    return history

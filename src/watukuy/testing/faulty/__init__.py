"""Store wrappers for crash testing: a forwarding base and a store that kills its process.

:class:`FaultyStore` wraps any :class:`~watukuy.model.ports.StateStore` and simulates the
death of the process that uses it at one of the store boundaries of the poll cycle (the kill
points K1..K7 of "How it works"). When an armed kill point is reached the wrapper raises
:class:`SimulatedCrash` and from then on it is *dead*: every further call raises
:class:`SimulatedCrash` without reaching the inner store, so no schedule save, no ack and no
lease release gets through, exactly as if the process had vanished. The lease it held
lingers until its TTL runs out. Calls the process had already handed to the inner store
when it died run to completion, like requests already on the wire. A fresh
:class:`FaultyStore` over the same inner store plays the restarted process.

:class:`SimulatedCrash` derives from :class:`BaseException`, not :class:`Exception`: the
engine handles ordinary failures (a failing fetch, a failing handler) and must not be able to
"handle" its own death.

:class:`LeaseAudit` watches the lease traffic of every incarnation over one inner store and
records breaches of G5 (two unexpired holders at once, epochs that do not grow, fenced
writes accepted from a superseded or released lease).

Example::

    audit = LeaseAudit()
    store = FaultyStore(MemoryStore(), audit=audit)
    store.arm("after-commit")           # the next commit_poll persists, then the process dies
"""

from __future__ import annotations

from ._audit import LeaseAudit
from ._forwarding import ForwardingStore
from ._kills import KILL_POINTS, KillPoint, SimulatedCrash
from ._store import FaultyStore

__all__ = [
    "KILL_POINTS",
    "FaultyStore",
    "ForwardingStore",
    "KillPoint",
    "LeaseAudit",
    "SimulatedCrash",
]

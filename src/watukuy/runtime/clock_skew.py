"""The one look at the store server's clock an engine on the system clock takes.

Leases are judged by each holder's own clock, so the hosts of every replica must agree
within the lease safety margin. A store that can tell its server's time
(:class:`~watukuy.model.ports.StoreClock`) is asked once, before the first pass.
"""

from __future__ import annotations

from watukuy.model.ports import Clock, StateStore, StoreClock
from watukuy.model.redact import RedactingLogger

__all__ = ["warn_on_clock_skew"]


async def warn_on_clock_skew(
    store: StateStore, clock: Clock, safety_margin_ms: int, log: RedactingLogger
) -> None:
    """Compare the store server's clock with this process's, once, and log a warning when
    they differ by more than half the lease safety margin (beyond the call's own time).

    A store that cannot tell its time is not asked; one that fails to answer is logged at
    debug level (its first real call will report it).
    """
    if not isinstance(store, StoreClock):
        return
    try:
        before = clock.now()
        server = await store.server_time()
        after = clock.now()
    except Exception as error:  # the first real call reports a store that is down
        log.debug("could not read the store's clock: %s", error)
        return
    skew = server - (before + after) // 2
    bound = max(safety_margin_ms // 2, 1)
    if abs(skew) - (after - before) // 2 > bound:
        log.warning(
            "the store's clock is %s ms %s this process's clock; leases are judged by "
            "each instance's own clock, so keep the clocks of every host within "
            "lease.safety_margin (%s ms) of each other (NTP); see "
            "https://watukuy.readthedocs.io/en/latest/stores/#clocks-and-leases",
            abs(skew),
            "ahead of" if skew > 0 else "behind",
            safety_margin_ms,
        )

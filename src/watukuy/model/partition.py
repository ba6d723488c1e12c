"""A partition: one tenant, account or region that a partitioned poller polls on its own."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from .records import dataclass, fast_init

__all__ = ["Partition"]


@fast_init
@dataclass(frozen=True, slots=True)
class Partition:
    """One partition of a partitioned poller (a tenant, an account, a region).

    Attributes:
        key: Stable string that identifies the partition in the store and in events.
        data: Anything ``fetch`` needs for it (credentials, base URL); never persisted,
            and left out of ``repr()`` so that a logged partition shows no credential.
    """

    key: str
    data: Any = field(default=None, repr=False)

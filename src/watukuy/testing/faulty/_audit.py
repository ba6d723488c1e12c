"""G5, watched from the store's side: lease traffic of every simulated process."""

from __future__ import annotations

from dataclasses import dataclass, field

from watukuy.model.events import iso_time
from watukuy.model.rows import Lease, PKey

__all__ = ["LeaseAudit"]


@dataclass(slots=True)
class _Held:
    owner: str
    epoch: int
    expires_at: int
    released: bool = False


@dataclass(slots=True)
class LeaseAudit:
    """Watches lease acquisitions, renewals, releases and fenced writes across processes.

    Share one audit between every :class:`FaultyStore` over the same inner store.

    Attributes:
        violations: G5 breaches, in the order they were seen.
        acquisitions: Leases handed out, in order.
    """

    violations: list[str] = field(default_factory=list)
    acquisitions: list[tuple[PKey, Lease]] = field(default_factory=list)
    _held: dict[PKey, list[_Held]] = field(default_factory=dict)
    _latest: dict[PKey, int] = field(default_factory=dict)

    def acquired(self, key: PKey, lease: Lease, now: int) -> None:
        """Record a successful ``acquire_lease`` at ``now``."""
        self.acquisitions.append((key, lease))
        live = [h for h in self._held.get(key, []) if not h.released and h.expires_at > now]
        for other in live:
            if other.owner != lease.owner:
                self.violations.append(
                    f"G5: {lease.owner} acquired {key} (epoch {lease.epoch}) at {iso_time(now)} "
                    f"while {other.owner} held an unexpired lease (epoch {other.epoch}) until "
                    f"{iso_time(other.expires_at)}"
                )
        latest = self._latest.get(key)
        if latest is not None and lease.epoch <= latest:
            self.violations.append(
                f"G5: epoch {lease.epoch} handed to {lease.owner} for {key} does not exceed "
                f"the previous epoch {latest}"
            )
        self._latest[key] = lease.epoch
        kept = [h for h in live if h.owner != lease.owner]
        self._held[key] = [*kept, _Held(lease.owner, lease.epoch, lease.expires_at)]

    def renewed(self, key: PKey, lease: Lease, expires_at: int) -> None:
        """Record a successful ``renew_lease``."""
        for held in self._held.get(key, []):
            if held.epoch == lease.epoch:
                held.expires_at = expires_at

    def released(self, key: PKey, lease: Lease) -> None:
        """Record a ``release_lease`` that reached the store."""
        for held in self._held.get(key, []):
            if held.epoch == lease.epoch:
                held.released = True

    def accepted(self, key: PKey, lease: Lease, operation: str) -> None:
        """Record a fenced write the store accepted; flag it when the lease was stale."""
        latest = self._latest.get(key)
        held = next((h for h in self._held.get(key, []) if h.epoch == lease.epoch), None)
        if held is not None and held.released:
            self.violations.append(
                f"G5: {operation} by {lease.owner} on {key} with released epoch "
                f"{lease.epoch} was accepted"
            )
        elif latest is not None and lease.epoch != latest:
            self.violations.append(
                f"G5: {operation} by {lease.owner} on {key} with stale epoch {lease.epoch} "
                f"was accepted (current epoch {latest})"
            )

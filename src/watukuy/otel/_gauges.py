"""Per-key values behind the observable gauges: circuit state and polling interval."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Observation
    from opentelemetry.util.types import AttributeValue

__all__ = ["CIRCUIT_CLOSED", "CIRCUIT_HALF_OPEN", "CIRCUIT_OPEN", "KeyGauges"]

CIRCUIT_CLOSED: Final = 0
"""``watukuy.circuit.state`` of a closed circuit."""
CIRCUIT_HALF_OPEN: Final = 1
"""``watukuy.circuit.state`` while a probe cycle runs."""
CIRCUIT_OPEN: Final = 2
"""``watukuy.circuit.state`` of an open circuit."""

# After these schedule reasons the circuit is open; "throttled" says nothing about it (a
# Retry-After answer leaves the breaker as it was); every other reason follows a success or
# a failure below the threshold, both of which leave the circuit closed.
_OPEN_REASONS: Final = frozenset({"circuit-open", "probe-failed"})
_SILENT_REASONS: Final = frozenset({"throttled"})

Key = tuple[str, str]
Attributes = Mapping[str, "AttributeValue"]


class KeyGauges:
    """The last known circuit state and interval of every (poller, partition).

    Hooks write from the event loop; the SDK reads from its export thread, hence the lock.

    Args:
        observation: ``opentelemetry.metrics.Observation`` (passed in so that this module
            does not import OpenTelemetry).
    """

    def __init__(self, observation: Callable[[int, Attributes], Observation]) -> None:
        self._observation = observation
        self._lock = threading.Lock()
        self._circuit: dict[Key, tuple[int, Attributes]] = {}
        self._interval: dict[Key, tuple[int, Attributes]] = {}

    def set_circuit(self, key: Key, value: int, attributes: Attributes) -> None:
        """Record the circuit state of ``key``."""
        with self._lock:
            self._circuit[key] = (value, attributes)

    def probe_started(self, key: Key) -> None:
        """A live cycle started: on an open circuit it is the half-open probe."""
        with self._lock:
            current = self._circuit.get(key)
            if current is not None and current[0] == CIRCUIT_OPEN:
                self._circuit[key] = (CIRCUIT_HALF_OPEN, current[1])

    def schedule_changed(
        self, key: Key, interval_ms: int, reason: str, attributes: Attributes
    ) -> None:
        """Record the interval of ``key``, and the circuit state its schedule reason implies.

        A failed probe re-opens the circuit without ``on_circuit_open``, and a key whose
        circuit never changed in this process has no circuit hook at all: the reason
        covers both.
        """
        with self._lock:
            self._interval[key] = (interval_ms, attributes)
            if reason in _OPEN_REASONS:
                self._circuit[key] = (CIRCUIT_OPEN, attributes)
            elif reason not in _SILENT_REASONS:
                self._circuit[key] = (CIRCUIT_CLOSED, attributes)

    def observe_circuit(self, options: CallbackOptions) -> Iterable[Observation]:
        """Callback of ``watukuy.circuit.state``."""
        return self._observe(self._circuit)

    def observe_interval(self, options: CallbackOptions) -> Iterable[Observation]:
        """Callback of ``watukuy.schedule.interval``."""
        return self._observe(self._interval)

    def _observe(self, values: dict[Key, tuple[int, Attributes]]) -> list[Observation]:
        with self._lock:
            entries = list(values.values())
        return [self._observation(value, attributes) for value, attributes in entries]

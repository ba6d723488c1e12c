"""Waits: jitter, exponential backoff and rate-limit pacing.

Each helper turns configuration (and, where randomness is involved, the injected
:class:`~watukuy.model.ports.Random`) into a whole number of milliseconds. Halves round up
(``2.5 -> 3``), unlike Python's :func:`round`, so that a scripted random source gives the
same answer on every platform and in every language that reads these rules.
"""

from __future__ import annotations

import math

from watukuy.model.errors import ConfigError
from watukuy.model.options import Backoff, Schedule
from watukuy.model.ports import Random
from watukuy.model.rows import RateLimitInfo

__all__ = ["apply_jitter", "backoff_ceiling", "backoff_delay", "pacing_delay", "throttle_wait"]


def _round_half_up(value: float) -> int:
    return math.floor(value + 0.5)


def apply_jitter(ms: int, fraction: float, random: Random) -> int:
    """Spread a wait symmetrically around its nominal value.

    The result is uniform in ``[ms * (1 - fraction), ms * (1 + fraction)]``, rounded to a
    whole millisecond. Jitter keeps many keys that started together from polling in lockstep.

    Args:
        ms: The nominal wait, in milliseconds (``>= 0``).
        fraction: Relative spread, from ``0`` (none) to ``1`` (anywhere in ``[0, 2 * ms]``).
        random: Source of the uniform draw; not consulted when ``fraction`` is ``0``.

    Returns:
        The jittered wait in milliseconds, never negative.

    Raises:
        ConfigError: ``ms`` is negative or ``fraction`` is outside ``[0, 1]``.

    Example:
        >>> class Lowest:
        ...     def random(self) -> float:
        ...         return 0.0
        >>> apply_jitter(10_000, 0.1, Lowest())
        9000
    """
    if ms < 0:
        raise ConfigError(f"expected a wait >= 0, got {ms!r}", field="ms")
    if not 0 <= fraction <= 1:
        raise ConfigError(f"expected a fraction between 0 and 1, got {fraction!r}", field="jitter")
    if fraction == 0 or ms == 0:
        return ms
    # Map [0, 1) onto [-1, 1) so the spread is centred on the nominal wait.
    offset = random.random() * 2 - 1
    return max(0, _round_half_up(ms * (1 + offset * fraction)))


def backoff_ceiling(attempt: int, backoff: Backoff) -> int:
    """The largest wait allowed before retry number ``attempt``.

    ``min(backoff.max, backoff.base * backoff.factor ** (attempt - 1))``, rounded to a whole
    millisecond. Used directly where a wait must be deterministic (a throttle without
    ``Retry-After``) and as the range of :func:`backoff_delay`.

    Args:
        attempt: The 1-based attempt number (the first retry is ``1``).
        backoff: Base, growth factor and cap.

    Returns:
        The ceiling in milliseconds.

    Raises:
        ConfigError: ``attempt`` is smaller than 1.
    """
    if isinstance(attempt, bool) or attempt < 1:
        raise ConfigError(f"expected an attempt number >= 1, got {attempt!r}", field="attempt")
    if backoff.base_ms == 0:
        return 0
    try:
        raw = backoff.base_ms * float(backoff.factor) ** (attempt - 1)
    except OverflowError:
        # A long outage makes the exponent huge; the cap applies long before that.
        return backoff.max_ms
    if not raw < backoff.max_ms:  # also an infinite product (base * factor ** n overflowed)
        return backoff.max_ms
    return _round_half_up(raw)


def backoff_delay(attempt: int, backoff: Backoff, random: Random) -> int:
    """Exponential backoff with full jitter.

    The wait is uniform in ``[0, backoff_ceiling(attempt, backoff)]``. Full jitter spreads
    the retries of many failing keys over the whole window, so a recovering API is not hit
    by all of them at once. The dispatcher uses the same rule for handler retries.

    Args:
        attempt: The 1-based attempt number.
        backoff: Base, growth factor and cap.
        random: Source of the uniform draw.

    Returns:
        The wait in milliseconds.

    Raises:
        ConfigError: ``attempt`` is smaller than 1.
    """
    ceiling = backoff_ceiling(attempt, backoff)
    return min(ceiling, _round_half_up(random.random() * ceiling))


def pacing_delay(rate_limit: RateLimitInfo | None, now: int) -> int | None:
    """The spacing that makes the remaining requests last until the rate-limit window resets.

    ``(reset_at - now) / max(remaining, 1)``, rounded up so the pace never overshoots: with
    nothing remaining the wait is the whole rest of the window.

    Args:
        rate_limit: What the API said in its last response, if anything.
        now: Current time (epoch ms).

    Returns:
        The spacing in milliseconds, or ``None`` when ``remaining`` or ``reset_at`` is
        unknown or the window has already reset.
    """
    if rate_limit is None or rate_limit.remaining is None or rate_limit.reset_at is None:
        return None
    window = rate_limit.reset_at - now
    if window <= 0:
        return None
    share = max(rate_limit.remaining, 1)
    return -(-window // share)


def throttle_wait(
    throttles: int, retry_after_ms: int | None, schedule: Schedule, random: Random
) -> int:
    """How long a throttled key waits: what the API asked, within a floor and a ceiling.

    The floor keeps a ``Retry-After: 0`` (or a throttle without the header) from turning
    into a request loop: before throttle number ``throttles`` in a row it is
    ``backoff_ceiling(throttles, schedule.backoff)`` (``schedule.min`` when the backoff base
    is zero), jittered by ``schedule.jitter``, so it grows exponentially while the API
    keeps refusing; a first throttle with a longer ``Retry-After`` waits exactly that. The
    ceiling, ``schedule.throttle_max`` (by default ``schedule.max``, never more than a day),
    keeps a far-future date or an absurd number of seconds from parking the key for years.

    Args:
        throttles: Throttles in a row, this one included (``>= 1``).
        retry_after_ms: What the API asked for, in milliseconds, if anything.
        schedule: The poller's schedule options.
        random: Source of the floor's jitter.

    Returns:
        The wait in milliseconds, between the floor and the ceiling (the ceiling wins when
        the floor would pass it).
    """
    ceiling = schedule.throttle_max_ms
    base = backoff_ceiling(max(1, throttles), schedule.backoff) or schedule.min_ms
    floor = min(ceiling, apply_jitter(base, schedule.jitter, random))
    asked = 0 if retry_after_ms is None else min(ceiling, max(0, retry_after_ms))
    return max(floor, asked)

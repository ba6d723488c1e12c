"""One way to turn a driver's exception into a :class:`~watukuy.StoreError`.

Every store adapter wraps the calls it makes into its driver with :func:`store_errors`, so
that callers see a single error type whose ``__cause__`` is the driver's own exception.
Errors that are already part of watukuy's vocabulary (``LeaseLostError``, ``ConfigError``,
an earlier ``StoreError``) pass through untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from watukuy.model.errors import StoreError, WatukuyError

__all__ = ["store_errors", "wrap_store_error"]


def wrap_store_error(what: str, error: BaseException) -> StoreError:
    """Build the ``StoreError`` for a failed driver call (the caller raises it ``from``).

    Args:
        what: What the store was doing, e.g. ``"commit_poll"``.
        error: The driver's exception.
    """
    detail = str(error) or type(error).__name__
    return StoreError(f"{what}: {detail}")


@contextmanager
def store_errors(what: str) -> Iterator[None]:
    """Re-raise any non-watukuy exception raised inside the block as ``StoreError``.

    Args:
        what: What the store was doing; it starts the error message.

    Raises:
        StoreError: With the original exception as ``__cause__``.
    """
    try:
        yield
    except WatukuyError:
        raise
    except Exception as error:
        raise wrap_store_error(what, error) from error

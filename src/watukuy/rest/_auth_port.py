"""The seam between a declarative poller and its credentials.

The built ``fetch`` knows nothing of bearer tokens, API keys or OAuth2: it hands each
:class:`~watukuy.rest.Call` to an :class:`Auth` to be signed before it is sent, and asks
the same object to renew its credentials once when the API answers ``401``. The kinds
watukuy ships (``Bearer``, ``ApiKey``, ``Basic``, ``OAuth2ClientCredentials``) implement
it; so can any object of yours.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from watukuy.runtime.context import FetchContext

    from ._call import Call

__all__ = ["Auth"]


@runtime_checkable
class Auth(Protocol):
    """Adds credentials to a request, and renews them after a ``401``.

    Both methods receive the ``ctx`` of the ``fetch`` in progress, so credentials can
    depend on ``ctx.partition`` (one tenant, one token) and a token request can go through
    ``ctx.http`` (budgets, redaction and TLS rules hold for it too).
    """

    async def apply(self, call: Call, ctx: FetchContext[Any]) -> Call:
        """Return ``call`` with the credentials added (headers or query parameters).

        Args:
            call: The request about to be sent, placeholders already filled in.
            ctx: The context of the ``fetch`` in progress.

        Returns:
            A new :class:`~watukuy.rest.Call`; the one given is left as it is.
        """
        ...

    async def refresh(self, call: Call, ctx: FetchContext[Any]) -> bool:
        """Renew the credentials after the API answered ``call`` with ``401``.

        Args:
            call: The request that was refused, as :meth:`apply` returned it.
            ctx: The context of the ``fetch`` in progress.

        Returns:
            ``True`` when new credentials were obtained: the request is then signed with
            :meth:`apply` and sent once more (once only). ``False`` lets the ``401`` fail the
            fetch as usual.
        """
        ...

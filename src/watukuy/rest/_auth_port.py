"""The seam between a declarative poller's requests and its credentials.

The built ``fetch`` knows nothing of tokens: before each request it asks the poller's
:class:`Auth` to add its credentials to the :class:`~watukuy.rest.Call`, and after a ``401``
it asks the same object whether they could be renewed. The kinds in
:mod:`watukuy.rest` (``Bearer``, ``ApiKey``, ``Basic``, ``OAuth2ClientCredentials``)
implement it; any object with these two methods can stand in for them.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from watukuy.runtime.context import FetchContext

from ._call import Call

__all__ = ["Auth"]


@runtime_checkable
class Auth(Protocol):
    """Adds credentials to a request, and renews them when the server refuses them.

    The contract the built ``fetch`` relies on:

    * :meth:`apply` is awaited before every request and returns the call to send (a new
      :class:`~watukuy.rest.Call`; the one given is never changed).
    * After a ``401`` answer, :meth:`refresh` is awaited with the call that was refused.
      ``True`` means the credentials are now different: the call is applied and sent once
      more (once only; a second ``401`` raises the usual ``HttpError``). ``False`` means
      nothing changed, and the ``401`` raises at once.

    Neither may log, store or put in an error message the credentials it handles.
    """

    async def apply(self, call: Call, ctx: FetchContext[Any]) -> Call:
        """The call with this auth's credentials added (headers or query parameters)."""
        ...

    async def refresh(self, call: Call, ctx: FetchContext[Any]) -> bool:
        """After a ``401`` to ``call``: renew the credentials; True when they changed."""
        ...

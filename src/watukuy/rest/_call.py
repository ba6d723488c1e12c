"""One HTTP request of a declarative poller, as data.

A description's :class:`~watukuy.rest.Request` is a template; for each page the paginator
and the auth turn it into a :class:`Call` (the method, the URL with its placeholders
filled in, the query, the headers and the JSON body), which the built ``fetch`` sends
through ``ctx.http``. A ``Call`` is immutable: every step returns a new one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Call"]


@dataclass(frozen=True, slots=True)
class Call:
    """A request about to be sent through ``ctx.http``.

    Attributes:
        method: The HTTP method, upper case.
        url: The absolute URL (or one relative to the HTTP client's ``base_url``).
        params: Query parameters; ``None`` values are left out by ``ctx.http``.
        headers: Request headers.
        json: The JSON body (``None``: no body).
    """

    method: str
    url: str
    params: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    json: Any = None

    def with_params(self, **params: Any) -> Call:
        """This call with ``params`` added to (or replacing those in) its query."""
        return dataclasses.replace(self, params={**self.params, **params})

    def with_headers(self, **headers: str) -> Call:
        """This call with ``headers`` added (or replacing those of the same name)."""
        return dataclasses.replace(self, headers={**self.headers, **headers})

    def with_url(self, url: str, *, keep_params: bool = False) -> Call:
        """This call sent to ``url`` instead (a next link carries its own query, so the
        template's parameters are dropped unless ``keep_params``)."""
        return dataclasses.replace(self, url=url, params=self.params if keep_params else {})

    def __repr__(self) -> str:
        # Headers may carry credentials: name them, never show their values.
        return (
            f"Call({self.method} {self.url!r}, params={dict(self.params)!r}, "
            f"headers={sorted(self.headers)!r})"
        )

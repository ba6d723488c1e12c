"""Building a poller from a description: :func:`define_rest_poller`.

The description (request, selectors, paginator, auth) becomes a ``fetch`` and the cursor
strategy the paginator implies, handed to :func:`watukuy.define_poller` with every other
option unchanged. The built ``fetch`` sends one request per page through ``ctx.http``
(budgets, ``Retry-After``, rate-limit pacing, redaction and redirect rules all hold), with
``raise_for_status=False``, and decides itself what the answer means:

=================================== =======================================================
the answer                          the page ``fetch`` returns
=================================== =======================================================
``2xx``                             the items, and whether the listing goes on
``304 Not Modified``                no items: the lane stays where it is
``401``                             ``auth.refresh()``; when it renewed the credentials the
                                    request is signed and sent once more
``404`` / ``416`` past the first    the end (``PageNumber(end="not_found")``) or a gone page
page (``410`` too, for a token)     (the listing shrank: ``wk.Page(gone=True)``)
anything else                       ``response.raise_for_status()``: the engine's usual
                                    failure path (stored error, backoff, circuit)
=================================== =======================================================

A token paginator under ``mode="full"`` pages a listing by tokens the API hands out (a next
URL, a ``next_cursor``, the last item's id). The built ``fetch`` returns the next page's
token as ``Page.cursor`` (as text; a keyset position as JSON text), the engine commits it
with the pass, and the next page is asked for with ``ctx.page_token``: a pass cut by the
page cap or a deadline resumes where it stood, in this process, after a restart or on
another replica. A pass stored before the engine kept tokens has none past its first page:
that page answers ``wk.Page(gone=True)``, the engine abandons the pass without deletes, and
the next cycle walks the listing again from page 1.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from watukuy.cursor import (
    CursorConfig,
    PageCursor,
    SnapshotDiff,
    TimestampCursor,
    TimestampPosition,
    TokenCursor,
)
from watukuy.model.errors import ConfigError
from watukuy.model.http_api import FetchResponse
from watukuy.model.json import dumps, loads
from watukuy.model.options import Reconcile
from watukuy.model.page import InvalidPageError, Page
from watukuy.model.redact import DEFAULT_REDACTION
from watukuy.runtime.context import FetchContext
from watukuy.runtime.poller import PollerDefinition, define_poller

from ._auth import ApiKey
from ._auth_port import Auth
from ._call import Call
from ._describe import (
    FieldSpec,
    ItemsSpec,
    Listing,
    Request,
    check_auth,
    check_paginator,
    field_reader,
    items_reader,
)
from ._paginate import PAGINATORS, Keyset
from ._paging import Kind, Paginator, Position, Reply, Step

__all__ = ["Mode", "define_rest_poller"]

Mode: TypeAlias = Literal["keyset", "token", "full"]
"""How a description follows its listing: ``"keyset"`` (a ``TimestampCursor``),
``"token"`` (a ``TokenCursor`` or ``PageCursor``: continue where the last cycle ended) or
``"full"`` (a ``SnapshotDiff``: read everything each cycle, deletes included)."""

_Strategy: TypeAlias = Literal["full", "token", "page", "keyset", "custom"]

_NOT_FOUND: Final = frozenset({404, 416})
_EXPIRED: Final = 410  # an expired token, for token paginators


@dataclass(frozen=True, slots=True)
class _OnePage:
    """No paginator: the endpoint answers the whole listing at once."""

    @property
    def kind(self) -> Kind:
        """``"page"``: this paginator pages by page numbers."""
        return "page"

    @property
    def ends_on_not_found(self) -> bool:
        """False: a ``404`` / ``416`` past the first page means the listing
        shrank (the page is gone), not that it ended."""
        return False

    def apply(self, call: Call, position: Position) -> Call:
        return call

    def step(self, reply: Reply) -> Step:
        return Step(has_more=False)


@dataclass(frozen=True, slots=True)
class _Description:
    """One listing, resolved: what the built ``fetch`` needs."""

    request: Request
    items: Callable[[Any], list[Any]]
    identity: Callable[[Any], Any]
    paginator: Paginator
    auth: Auth | None
    transform: Callable[[Any], Any] | None


def _token_text(token: Any) -> str:
    """A paginator's token as the text the engine stores with a pass (``Page.cursor``): a
    keyset position as JSON, anything else as ``str``."""
    if isinstance(token, TimestampPosition):
        return dumps({"value": token.value, "tie_break": token.tie_break})
    return str(token)


def _without_credentials(text: str, names: Collection[str]) -> str:
    """A next link without the query parameters that carry a credential (an API key in the
    query string, which many APIs echo into their next links): the token is stored with
    the key's state, and the auth adds the parameter again to every request."""
    if not names or "?" not in text:
        return text
    parts = urlsplit(text)
    query = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(name, value) for name, value in query if name not in names]
    if len(kept) == len(query):
        return text
    return urlunsplit(parts._replace(query=urlencode(kept)))


def _token_of(kind: Kind, text: str) -> Any:
    """The paginator's token from the text :func:`_token_text` made of it."""
    if kind == "keyset":
        try:
            data = loads(text)
        except ValueError:
            return text
        if isinstance(data, dict) and set(data) == {"value", "tie_break"}:
            return TimestampPosition(data["value"], data["tie_break"])
    return text


def _strategy_of(cursor: CursorConfig) -> _Strategy:
    if isinstance(cursor, SnapshotDiff):
        return "full"
    if isinstance(cursor, TokenCursor):
        return "token"
    if isinstance(cursor, PageCursor):
        return "page"
    if isinstance(cursor, TimestampCursor):
        return "keyset"
    return "custom"


class _Fetcher:
    """The decisions of the built ``fetch`` for one description under one strategy."""

    def __init__(self, description: _Description, strategy: _Strategy) -> None:
        self.description = description
        self.strategy = strategy
        self.kind = description.paginator.kind
        # A full listing paged by tokens: each page's token is ``ctx.page_token``.
        self.chained = strategy == "full" and self.kind != "page"
        auth = description.auth
        # Parameters of the request template whose names say they carry a credential (an
        # access token passed in the query, perhaps read from the environment): APIs echo
        # them into their next links like an API key. They are kept out of the stored links
        # too, and sent again with every page that follows one (see with_secrets).
        self.template_secrets: frozenset[str] = frozenset(
            name for name in description.request.params if DEFAULT_REDACTION.is_sensitive(name)
        )
        # Query parameters that carry a credential: kept out of every stored token. (The
        # auth adds its own key again to every request.)
        self.secret_params: frozenset[str] = self.template_secrets | (
            frozenset({auth.name})
            if isinstance(auth, ApiKey) and auth.location == "query"
            else frozenset()
        )

    def position(self, ctx: FetchContext[Any]) -> tuple[Position | None, bool]:
        """Where this request stands (``None``: unknown, the page is gone), and whether it
        is the first position, where a ``404`` is an error rather than an end."""
        cursor = ctx.cursor
        if self.strategy == "token":
            return Position(page=ctx.page, token=cursor.value, cursor=cursor), cursor.value is None
        if self.strategy == "page":
            return Position(page=cursor.page, cursor=cursor), cursor.page == 1
        if self.strategy == "keyset":
            # A timestamp cursor is never past an end: a missing page there is an error.
            return Position(page=ctx.page, token=cursor, cursor=cursor), True
        if not self.chained:
            return Position(page=ctx.page, cursor=cursor), ctx.page == 1
        text = ctx.page_token
        if text is None and ctx.page > 1:
            return None, False  # a pass stored before its tokens were kept with it
        token = None if text is None else _token_of(self.kind, text)
        return Position(page=ctx.page, token=token, cursor=cursor), ctx.page == 1

    def with_secrets(self, template: Call, call: Call) -> Call:
        """``call`` (``template`` as the paginator applied it) with the template's
        credential parameters put back where it follows a link that lacks them: they were
        kept out of the link when it was stored (:func:`_without_credentials`)."""
        if not self.template_secrets or call is template:
            return call
        present = set(call.params)
        if "?" in call.url:
            query = urlsplit(call.url).query
            present.update(name for name, _ in parse_qsl(query, keep_blank_values=True))
        missing = {
            name: template.params[name]
            for name in sorted(self.template_secrets)
            if name in template.params and name not in present
        }
        return call.with_params(**missing) if missing else call

    def unchanged(self) -> Page[Any]:
        """The page for a ``304``, or for the end of a listing that ends on a ``404``."""
        if self.strategy == "token":
            return Page(items=[], has_more=False)  # keep the token this page was asked with
        return Page(items=[])

    def page(self, ctx: FetchContext[Any], items: list[Any], step: Step) -> Page[Any]:
        """The ``wk.Page`` of a read answer (with the next page's token, for a listing paged
        by tokens)."""
        name = type(self.description.paginator).__name__
        if step.has_more and step.token is None and (self.chained or self.strategy == "token"):
            # Asking again without a token would read the first page again, for ever.
            raise InvalidPageError(
                f"{name}.step() said there is more but gave no token for the next page"
            )
        if self.chained and step.has_more:
            text = _without_credentials(_token_text(step.token), self.secret_params)
            if text == ctx.page_token:
                # The same token asks for the same page: the pass would never end.
                raise InvalidPageError(
                    f"{name}.step() handed out the token page {ctx.page} was asked with: "
                    "the same page would be read again, for ever"
                )
            return Page(items=items, cursor=text, has_more=True)
        if self.strategy == "token":
            token = (
                None
                if step.token is None
                else _without_credentials(str(step.token), self.secret_params)
            )
            return Page(items=items, cursor=token, has_more=step.has_more)
        if self.strategy == "custom":
            return Page(items=items, cursor=step.token, has_more=step.has_more)
        return Page(items=items, has_more=step.has_more)

    def missing(self, status: int, first: bool) -> Page[Any] | None:
        """The page for a ``404`` / ``416`` (``410`` for a token) past the first position,
        or ``None`` when the status is not one of those."""
        if first or self.strategy == "keyset":
            return None
        if status in _NOT_FOUND:
            return (
                self.unchanged()
                if self.description.paginator.ends_on_not_found
                else Page(gone=True)
            )
        if status == _EXPIRED and self.kind == "token":
            return Page(gone=True)
        return None


async def _request(call: Call, ctx: FetchContext[Any]) -> FetchResponse:
    return await ctx.http.request(
        call.method,
        call.url,
        params=call.params or None,
        headers=call.headers or None,
        json=call.json,
        raise_for_status=False,
    )


async def _send(
    call: Call, auth: Auth | None, ctx: FetchContext[Any]
) -> tuple[Call, FetchResponse]:
    """Sign and send ``call``; after a ``401``, renew the credentials and send it once more."""
    if auth is None:
        return call, await _request(call, ctx)
    signed = await auth.apply(call, ctx)
    response = await _request(signed, ctx)
    if response.status == 401 and await auth.refresh(signed, ctx):
        signed = await auth.apply(call, ctx)
        response = await _request(signed, ctx)
    return signed, response


def _build_fetch(description: _Description, strategy: _Strategy) -> Callable[..., Any]:
    fetcher = _Fetcher(description, strategy)

    async def fetch(ctx: FetchContext[Any]) -> Page[Any]:
        position, first = fetcher.position(ctx)
        if position is None:
            return Page(gone=True)  # a pass stored without the token of this page
        template = description.request.render(ctx.partition)
        applied = fetcher.with_secrets(template, description.paginator.apply(template, position))
        call, response = await _send(applied, description.auth, ctx)
        if response.not_modified:
            return fetcher.unchanged()
        missing = fetcher.missing(response.status, first)
        if missing is not None:
            return missing
        response.raise_for_status()
        body = response.json()
        items = description.items(body)
        if description.transform is not None:
            items = [description.transform(item) for item in items]
        step = description.paginator.step(
            Reply(
                call=call,
                position=position,
                url=response.url,
                headers=response.headers,
                body=body,
                items=items,
                identity=description.identity,
            )
        )
        return fetcher.page(ctx, items, step)

    return fetch


# --- the cursor a description implies ---------------------------------------------------------


def _implied_cursor(paginator: Paginator, mode: Mode | None) -> CursorConfig:
    kind = paginator.kind
    if mode is None:
        mode = "keyset" if kind == "keyset" else "full"
    if mode == "full":
        return SnapshotDiff()
    if mode == "keyset":
        if kind != "keyset":
            raise ConfigError(
                f"'keyset' needs a keyset paginator (rest.Keyset), got a {kind} paginator",
                field="mode",
            )
        if isinstance(paginator, Keyset):
            return paginator.cursor()
        field = getattr(paginator, "field", None)
        if not isinstance(field, str):
            raise ConfigError(
                "a keyset paginator of your own needs a 'field' attribute, or give cursor=",
                field="paginator",
            )
        return TimestampCursor(field=field, tie_break=getattr(paginator, "tie_break", None))
    if kind == "keyset":
        raise ConfigError(
            "a keyset paginator follows 'keyset' or 'full', not 'token'", field="mode"
        )
    return TokenCursor() if kind == "token" else PageCursor()


def _check_mode(mode: object) -> Mode | None:
    if mode is not None and mode not in ("keyset", "token", "full"):
        raise ConfigError(f"expected 'keyset', 'token', 'full' or None, got {mode!r}", field="mode")
    return mode


def _callable(value: object, field: str) -> Callable[[Any], Any] | None:
    if value is not None and not callable(value):
        raise ConfigError(f"expected a callable, got {value!r}", field=field)
    return value


def _reconcile(reconcile: object, main: _Description) -> Reconcile | Mapping[str, Any] | None:
    if reconcile is None or isinstance(reconcile, Reconcile | Mapping):
        return reconcile
    if not isinstance(reconcile, Listing):
        raise ConfigError(
            f"expected a rest.Listing (or a wk.Reconcile), got {reconcile!r}", field="reconcile"
        )
    listing = _Description(
        request=main.request if reconcile.request is None else Request.of(reconcile.request),
        items=main.items if reconcile.items is None else items_reader(reconcile.items),
        identity=main.identity,
        paginator=reconcile.paginator or main.paginator,
        auth=reconcile.auth or main.auth,
        transform=main.transform,
    )
    return Reconcile(every=reconcile.every, fetch=_build_fetch(listing, "full"))


def define_rest_poller(
    *,
    name: str,
    request: Request | str,
    identity: FieldSpec,
    items: ItemsSpec = ".",
    version: FieldSpec | None = None,
    paginator: Paginator | None = None,
    mode: Mode | None = None,
    auth: Auth | None = None,
    transform: Callable[[Any], Any] | None = None,
    reconcile: Listing | Reconcile | None = None,
    **poller_options: Any,
) -> PollerDefinition[Any]:
    """Declare a poller from a description of its endpoint.

    Args:
        name: The poller's name (as for :func:`watukuy.define_poller`).
        request: A :class:`~watukuy.rest.Request`, or just the URL of the first page.
        identity: Where an item's identity is: a dotted path (``"id"``), or
            ``(item) -> identity``.
        items: Where the list of items is in a body: a dotted path (``"results"``,
            ``"data.orders.nodes"``; ``"."`` or ``""``: the body itself), or
            ``(body) -> list``.
        version: Where an item's version is (a dotted path or a callable); ``None``: the
            content hash.
        paginator: How to ask for the next page (``rest.LinkHeader()``,
            ``rest.PageNumber()``, ..., or an object with the ``rest.Paginator``
            protocol); ``None``: the endpoint answers everything at once.
        mode: ``"keyset"``, ``"token"`` or ``"full"``; ``None``: ``"keyset"`` for
            ``rest.Keyset``, ``"full"`` for every other paginator. ``"full"`` reads the whole
            listing each cycle and finds deletes; ``"token"`` continues where the last
            cycle ended (a ``TokenCursor``, or a ``PageCursor`` for page numbers and
            offsets), best paired with a ``reconcile`` listing.
        auth: Credentials (``rest.Bearer(...)``, ..., or an object with the ``rest.Auth``
            protocol).
        transform: ``(item) -> item``, applied to every item before anything reads it.
        reconcile: A :class:`~watukuy.rest.Listing` (built into a ``wk.Reconcile``) or a
            ``wk.Reconcile`` of your own: a full listing that finds deletes for
            ``mode="keyset"`` and ``mode="token"``.
        **poller_options: Everything else goes to :func:`watukuy.define_poller` unchanged
            (``schedule``, ``budget``, ``partitions``, ``delivery``, ``retain``, ``deletes``,
            ``schema``, ``max_pages_per_cycle``, ...). ``cursor=`` is accepted only with a
            paginator of your own; ``fetch=`` never.

    Returns:
        The validated poller definition.

    Raises:
        ConfigError: Any part of the description is invalid; the message names the field.
    """
    if "fetch" in poller_options:
        raise ConfigError(
            "is written by define_rest_poller; describe the request instead", field="fetch"
        )
    checked_paginator = _OnePage() if paginator is None else check_paginator(paginator)
    description = _Description(
        request=Request.of(request),
        items=items_reader(items),
        identity=field_reader(identity, "identity"),
        paginator=checked_paginator,
        auth=None if auth is None else check_auth(auth),
        transform=_callable(transform, "transform"),
    )
    checked_mode = _check_mode(mode)
    cursor = poller_options.pop("cursor", None)
    if cursor is not None and type(checked_paginator) in (*PAGINATORS.values(), _OnePage):
        raise ConfigError(
            "is implied by the paginator (choose it with mode=); cursor= is for a paginator "
            "of your own",
            field="cursor",
        )
    if cursor is None:
        cursor = _implied_cursor(checked_paginator, checked_mode)
    options = dict(poller_options)
    if version is not None:
        options["version"] = field_reader(version, "version")
    return define_poller(
        name=name,
        fetch=_build_fetch(description, _strategy_of(cursor)),
        identity=description.identity,
        cursor=cursor,
        reconcile=_reconcile(reconcile, description),
        **options,
    )

"""Paginators: how a declarative poller asks for the next page, and how it knows the end.

A paginator is a pure description with two decisions, both on plain data:

* :meth:`Paginator.apply` turns the request template's :class:`~watukuy.rest.Call` into the
  call for one :class:`Position` (a page number, a token, a keyset);
* :meth:`Paginator.step` reads an answer (:class:`Reply`) and says whether the listing
  goes on and with which token (:class:`Step`).

The built ``fetch`` sends, parses and turns the step into a ``wk.Page``; the paginator never
sees the network. Its :attr:`~Paginator.kind` says what kind of position it pages by, which
decides the cursor strategy a description implies:

========= =============================================== ================================
kind      paginators                                       what ``Position`` carries
========= =============================================== ================================
``page``  :class:`PageNumber`, :class:`OffsetLimit`        ``page``: 1, 2, 3, ...
``token`` :class:`LinkHeader`, :class:`NextUrl`,           ``token``: ``None`` on the first
          :class:`CursorParam`, :class:`StartingAfter`     page, then what ``step`` returned
``keyset`` :class:`Keyset`                                 ``token``: a ``TimestampPosition``
========= =============================================== ================================

Any object with the same members is a paginator too (the escape hatch; the protocol and
its records are in :mod:`watukuy.rest._paging`); :data:`PAGINATORS` maps the ``type``
names of a TOML file to the classes.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias
from urllib.parse import urljoin

from watukuy.cursor.config import TimestampCursor, TimestampPosition
from watukuy.cursor.path import MISSING
from watukuy.model.durations import Duration
from watukuy.model.errors import ConfigError
from watukuy.model.page import InvalidPageError

from ._call import Call
from ._paging import (
    Kind,
    Paginator,
    Position,
    Reply,
    Step,
    check_choice,
    check_name,
    check_optional_path,
    check_path_option,
    check_positive,
    flag,
    present,
    read,
)

__all__ = [
    "PAGINATORS",
    "CursorParam",
    "Keyset",
    "Kind",
    "LinkHeader",
    "NextUrl",
    "OffsetLimit",
    "PageNumber",
    "Paginator",
    "Position",
    "Reply",
    "StartingAfter",
    "Step",
    "parse_link_header",
]


# --- reading answers ---------------------------------------------------------------------


def _link_target(value: Any, reply: Reply, path: str) -> str | None:
    if not present(value):
        return None
    if not isinstance(value, str):
        raise InvalidPageError(f"expected a URL at {path!r} in the body, got {value!r}")
    return urljoin(reply.url, value)


_LINK: Final = re.compile(r"<([^>]*)>((?:\s*;\s*[^;,\"=]+(?:=\s*(?:\"[^\"]*\"|[^;,\"]*))?)*)")
_LINK_PARAM: Final = re.compile(r";\s*([^;=\s]+)\s*(?:=\s*(?:\"([^\"]*)\"|([^;,\s]*)))?")


def parse_link_header(value: str) -> dict[str, str]:
    """The targets of an RFC 8288 ``Link`` header, by relation type.

    ``<https://api/x?page=2>; rel="next", <https://api/x?page=5>; rel="last"`` gives
    ``{"next": "https://api/x?page=2", "last": "https://api/x?page=5"}``. A link with
    several relations (``rel="next last"``) is listed under each; the first link of a
    relation wins.
    """
    links: dict[str, str] = {}
    for match in _LINK.finditer(value):
        target, params = match.group(1).strip(), match.group(2)
        for param in _LINK_PARAM.finditer(params):
            if param.group(1).lower() != "rel":
                continue
            rels = param.group(2) if param.group(2) is not None else param.group(3) or ""
            for rel in rels.lower().split():
                links.setdefault(rel, target)
    return links


def _set_dotted(body: Any, path: str, value: Any) -> dict[str, Any]:
    """A copy of the JSON object ``body`` with ``value`` at the dotted ``path``."""
    head, _, rest = path.partition(".")
    copy: dict[str, Any] = dict(body) if isinstance(body, Mapping) else {}
    copy[head] = _set_dotted(copy.get(head), rest, value) if rest else value
    return copy


# --- token paginators ----------------------------------------------------------------------


class _EndsOnItsOwnSign:
    """A paginator whose listing ends by a sign of its own (no next link, ``has_more``
    false, a short page), so that a ``404`` / ``416`` past the first page means the page is
    gone: the listing shrank while it was read."""

    __slots__ = ()

    @property
    def ends_on_not_found(self) -> bool:
        """False: a ``404`` / ``416`` past the first page is a gone page, not the end."""
        return False


@dataclass(frozen=True, slots=True)
class LinkHeader(_EndsOnItsOwnSign):
    """Follow the ``Link`` response header (RFC 8288), as GitHub pages.

    Each answer's ``rel="next"`` link is the URL of the next page (it carries its own
    query, so the template's ``params`` are sent with the first page only); no such link
    ends the listing.

    Args:
        rel: The relation type to follow.
    """

    rel: str = "next"

    @property
    def kind(self) -> Kind:
        """``"token"``: it pages by tokens the API hands out."""
        return "token"

    def __post_init__(self) -> None:
        object.__setattr__(self, "rel", check_name(self.rel, "paginator.rel").lower())

    def apply(self, call: Call, position: Position) -> Call:
        """The first page as the template says; later pages at the link's URL."""
        return call if position.token is None else call.with_url(str(position.token))

    def step(self, reply: Reply) -> Step:
        """More while the answer links a next page."""
        header = reply.headers.get("link") or reply.headers.get("Link") or ""
        target = parse_link_header(header).get(self.rel)
        if not target:
            return Step(has_more=False)
        return Step(has_more=True, token=urljoin(reply.url, target))


@dataclass(frozen=True, slots=True)
class NextUrl(_EndsOnItsOwnSign):
    """Follow a next-page URL in the body, as Django REST Framework's ``next``.

    Args:
        path: Dotted path of the URL in the body; ``null``, ``""`` or missing ends the
            listing. A relative URL is resolved against the page's own.
    """

    path: str = "next"

    @property
    def kind(self) -> Kind:
        """``"token"``: it pages by tokens the API hands out."""
        return "token"

    def __post_init__(self) -> None:
        check_path_option(self.path, "paginator.path")

    def apply(self, call: Call, position: Position) -> Call:
        """The first page as the template says; later pages at the URL the body gave."""
        return call if position.token is None else call.with_url(str(position.token))

    def step(self, reply: Reply) -> Step:
        """More while the body holds a next URL."""
        target = _link_target(read(reply.body, self.path), reply, self.path)
        return Step(has_more=target is not None, token=target)


@dataclass(frozen=True, slots=True)
class CursorParam(_EndsOnItsOwnSign):
    """Send back a token the body hands out: Slack's ``response_metadata.next_cursor``, a
    GraphQL connection's ``pageInfo.endCursor``.

    Args:
        path: Dotted path of the next token in the body.
        param: Where the token goes: the query parameter's name, or with
            ``location="json"`` a dotted path inside the JSON body (``"variables.after"``).
        has_more: Dotted path of a boolean that says whether there is more
            (``"data.repository.issues.pageInfo.hasNextPage"``); without it, a ``null`` or
            empty token ends the listing.
        location: ``"query"`` or ``"json"``.
    """

    path: str
    param: str = "cursor"
    has_more: str | None = None
    location: Literal["query", "json"] = "query"

    @property
    def kind(self) -> Kind:
        """``"token"``: it pages by tokens the API hands out."""
        return "token"

    def __post_init__(self) -> None:
        check_path_option(self.path, "paginator.path")
        check_choice(self.location, "paginator.location", ("query", "json"))
        if self.location == "json":
            check_path_option(self.param, "paginator.param")
        else:
            check_name(self.param, "paginator.param")
        check_optional_path(self.has_more, "paginator.has_more")

    def apply(self, call: Call, position: Position) -> Call:
        """The template with the token added as a query parameter or into the body."""
        if position.token is None:
            return call
        if self.location == "query":
            return call.with_params(**{self.param: position.token})
        return dataclasses.replace(call, json=_set_dotted(call.json, self.param, position.token))

    def step(self, reply: Reply) -> Step:
        """More while the token is there (and ``has_more``, when given, is true)."""
        token = read(reply.body, self.path)
        if not present(token):
            return Step(has_more=False)
        if not isinstance(token, str | int):
            raise InvalidPageError(f"expected a token at {self.path!r} in the body, got {token!r}")
        more = True if self.has_more is None else flag(reply.body, self.has_more)
        return Step(has_more=more, token=str(token))


@dataclass(frozen=True, slots=True)
class StartingAfter(_EndsOnItsOwnSign):
    """Page after the last item's identity, as Stripe lists (``starting_after``).

    The identity is read with the description's ``identity`` from the item as the API sent
    it (after ``transform``, before any ``schema``).

    Args:
        param: The query parameter that takes the last identity.
        has_more: Dotted path of the boolean that says whether there is more; ``None``:
            a page shorter than ``limit`` is the last.
        limit_param: The query parameter of the page size (``None``: not sent).
        limit: The page size to ask for.
    """

    param: str = "starting_after"
    has_more: str | None = "has_more"
    limit_param: str | None = "limit"
    limit: int = 100

    @property
    def kind(self) -> Kind:
        """``"token"``: it pages by tokens the API hands out."""
        return "token"

    def __post_init__(self) -> None:
        check_name(self.param, "paginator.param")
        check_optional_path(self.has_more, "paginator.has_more")
        if self.limit_param is not None:
            check_name(self.limit_param, "paginator.limit_param")
        check_positive(self.limit, "paginator.limit")

    def apply(self, call: Call, position: Position) -> Call:
        """The template with the page size, and after the first page the last identity."""
        params: dict[str, Any] = {}
        if self.limit_param is not None:
            params[self.limit_param] = self.limit
        if position.token is not None:
            params[self.param] = position.token
        return call.with_params(**params)

    def step(self, reply: Reply) -> Step:
        """More while ``has_more`` says so (or the page is full); the next page starts
        after the last item's identity."""
        if not reply.items:
            return Step(has_more=False)
        token = str(reply.identity(reply.items[-1]))
        if self.has_more is not None:
            return Step(has_more=flag(reply.body, self.has_more), token=token)
        return Step(has_more=len(reply.items) >= self.limit, token=token)


# --- page paginators ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetLimit(_EndsOnItsOwnSign):
    """Page by ``offset`` and ``limit``: page N starts at ``(N - 1) * limit``.

    Args:
        offset_param: The query parameter of the offset.
        limit_param: The query parameter of the page size.
        limit: The page size to ask for.
        total: Dotted path of the listing's total count in the body; the listing ends
            once ``offset + limit`` reaches it. A page shorter than ``limit`` (or empty)
            ends it too.
    """

    offset_param: str = "offset"
    limit_param: str = "limit"
    limit: int = 100
    total: str | None = None

    @property
    def kind(self) -> Kind:
        """``"page"``: it pages by page number (``ctx.page``)."""
        return "page"

    def __post_init__(self) -> None:
        check_name(self.offset_param, "paginator.offset_param")
        check_name(self.limit_param, "paginator.limit_param")
        check_positive(self.limit, "paginator.limit")
        check_optional_path(self.total, "paginator.total")

    def apply(self, call: Call, position: Position) -> Call:
        """The template with the page's offset and the limit."""
        offset = (position.page - 1) * self.limit
        return call.with_params(**{self.offset_param: offset, self.limit_param: self.limit})

    def step(self, reply: Reply) -> Step:
        """More while pages are full and the total (when given) is not reached."""
        if len(reply.items) < self.limit:
            return Step(has_more=False)
        if self.total is not None:
            total = read(reply.body, self.total)
            if isinstance(total, bool) or not isinstance(total, int):
                raise InvalidPageError(
                    f"expected a count at {self.total!r} in the body, got {total!r}"
                )
            return Step(has_more=reply.position.page * self.limit < total)
        return Step(has_more=True)


PageEnd: TypeAlias = Literal["empty", "short", "has_more", "total", "not_found"]
"""How a :class:`PageNumber` listing says it ended."""


@dataclass(frozen=True, slots=True)
class PageNumber:
    """Page by page number (``?page=1``, ``?page=2``, ...).

    Args:
        param: The query parameter of the page number.
        start: The number of the first page (``0`` for zero-based APIs).
        size_param: The query parameter of the page size (``None``: not sent).
        size: The page size (sent as ``size_param``; the ``"short"`` rule compares to it).
        end: How the last page is recognised: ``"empty"`` (the page after it is empty),
            ``"short"`` (a page with fewer than ``size`` items), ``"has_more"`` (the boolean
            at ``has_more`` is false), ``"total"`` (the page number reaches the count at
            ``total_pages``), ``"not_found"`` (a page past the end answers ``404`` or
            ``416``, as Django REST Framework does). An empty page always ends the listing.
        has_more: Dotted path of the boolean (or of a next link, ``null`` on the last
            page), for ``end="has_more"``.
        total_pages: Dotted path of the page count, for ``end="total"``.
    """

    param: str = "page"
    start: int = 1
    size_param: str | None = None
    size: int | None = None
    end: PageEnd = "empty"
    has_more: str | None = None
    total_pages: str | None = None

    @property
    def kind(self) -> Kind:
        """``"page"``: it pages by page number (``ctx.page``)."""
        return "page"

    def __post_init__(self) -> None:
        check_name(self.param, "paginator.param")
        check_positive(self.start, "paginator.start", minimum=0)
        check_choice(
            self.end, "paginator.end", ("empty", "short", "has_more", "total", "not_found")
        )
        if self.size_param is not None:
            check_name(self.size_param, "paginator.size_param")
        if self.size is not None:
            check_positive(self.size, "paginator.size")
        elif self.size_param is not None or self.end == "short":
            why = "size_param is given" if self.size_param is not None else 'end="short"'
            raise ConfigError(f"is required when {why}", field="paginator.size")
        check_optional_path(self.has_more, "paginator.has_more")
        check_optional_path(self.total_pages, "paginator.total_pages")
        if self.end == "has_more" and self.has_more is None:
            raise ConfigError('is required when end="has_more"', field="paginator.has_more")
        if self.end == "total" and self.total_pages is None:
            raise ConfigError('is required when end="total"', field="paginator.total_pages")

    @property
    def ends_on_not_found(self) -> bool:
        """True with ``end="not_found"``."""
        return self.end == "not_found"

    def apply(self, call: Call, position: Position) -> Call:
        """The template with the page number (and the page size, when named)."""
        params: dict[str, Any] = {self.param: self.start + position.page - 1}
        if self.size_param is not None:
            params[self.size_param] = self.size
        return call.with_params(**params)

    def step(self, reply: Reply) -> Step:
        """More by the ``end`` rule; never after an empty page."""
        if not reply.items:
            return Step(has_more=False)
        if self.end == "short":
            return Step(has_more=len(reply.items) >= (self.size or 0))
        if self.end == "has_more":
            return Step(has_more=flag(reply.body, self.has_more or ""))
        if self.end == "total":
            pages = read(reply.body, self.total_pages or "")
            if isinstance(pages, bool) or not isinstance(pages, int):
                raise InvalidPageError(
                    f"expected a page count at {self.total_pages!r} in the body, got {pages!r}"
                )
            return Step(has_more=reply.position.page < pages)
        return Step(has_more=True)  # "empty" and "not_found": ask for the next one


# --- keyset --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Keyset(_EndsOnItsOwnSign):
    """Ask for what changed since a timestamp, after a tie-break (``(updated_since,
    after_id)``): the incremental listing watukuy follows best.

    The API is expected to answer, in ``(field, tie_break)`` order, the items with
    ``field > since``, or ``field == since`` and ``tie_break > after``. Under the implied
    ``mode="keyset"`` the poller's cursor is a ``wk.TimestampCursor(field=field,
    tie_break=tie_break)``, whose default lookback re-reads a short window on each cycle
    for rows that commit late. Under ``mode="full"`` the same parameters walk the whole
    listing from the start, each page after the previous page's last item.

    Args:
        since_param: The query parameter of the timestamp (not sent on the first request).
        after_param: The query parameter of the tie-break (``None``: the API has none; the
            cursor then keeps no tie-break and its lookback re-reads the ties).
        field: Dotted path of the modification time in an item.
        tie_break: Dotted path of the unique second key (``None``: none, and
            ``after_param`` is not sent).
        limit_param: The query parameter of the page size (``None``: not sent).
        limit: The page size; a page shorter than it is the last.
        has_more: Dotted path in the body that says whether there is more: a boolean, or a
            next link that is ``null`` on the last page (``"next"`` for Django REST
            Framework). ``None``: the page size decides.
        initial: The API's own timestamp to start from (``TimestampCursor.initial``);
            ``None``: the beginning.
        lag: ``TimestampCursor.lag``: items newer than ``now - lag`` wait for the next
            cycle.
        overlap: ``TimestampCursor.overlap``; ``None`` (the default) keeps the automatic
            late-commit lookback.
    """

    since_param: str = "updated_since"
    after_param: str | None = "after_id"
    field: str = "updated_at"
    tie_break: str | None = "id"
    limit_param: str | None = "limit"
    limit: int = 100
    has_more: str | None = None
    initial: str | int | float | None = None
    lag: Duration = 0
    overlap: Duration | None = None

    @property
    def kind(self) -> Kind:
        """``"keyset"``: it pages by a timestamp and a tie-break."""
        return "keyset"

    def __post_init__(self) -> None:
        check_name(self.since_param, "paginator.since_param")
        if self.after_param is not None:
            check_name(self.after_param, "paginator.after_param")
        check_path_option(self.field, "paginator.field")
        check_optional_path(self.tie_break, "paginator.tie_break")
        if self.limit_param is not None:
            check_name(self.limit_param, "paginator.limit_param")
        check_positive(self.limit, "paginator.limit")
        check_optional_path(self.has_more, "paginator.has_more")
        try:
            self.cursor()
        except ConfigError as error:  # the cursor's own checks, under this paginator's name
            name = (error.field or "").removeprefix("cursor.")
            raise ConfigError(
                error.message.removeprefix(f"{error.field}: "), field=f"paginator.{name}"
            ) from None

    def cursor(self) -> TimestampCursor:
        """The cursor ``mode="keyset"`` follows: ``field``, and the tie-break when the API
        takes it back (both ``tie_break`` and ``after_param`` given)."""
        return TimestampCursor(
            field=self.field,
            tie_break=self.tie_break if self.after_param is not None else None,
            initial=self.initial,
            lag=self.lag,
            overlap=self.overlap,
        )

    def apply(self, call: Call, position: Position) -> Call:
        """The template with the timestamp and tie-break of the position, and the limit."""
        at = position.token if isinstance(position.token, TimestampPosition) else None
        params: dict[str, Any] = {}
        if at is not None and at.value is not None:
            params[self.since_param] = at.value
            after = self.after_param if self.tie_break is not None else None
            if after is not None and at.tie_break is not None:
                params[after] = at.tie_break
        if self.limit_param is not None:
            params[self.limit_param] = self.limit
        return call.with_params(**params)

    def step(self, reply: Reply) -> Step:
        """More while pages are full (or ``has_more`` says so); the next position is the
        last item's ``(field, tie_break)``."""
        if not reply.items:
            return Step(has_more=False)
        if self.has_more is not None:
            marker = read(reply.body, self.has_more)
            more = marker if isinstance(marker, bool) else present(marker)
        else:
            more = len(reply.items) >= self.limit
        last = reply.items[-1]
        value = read(last, self.field)
        if value is MISSING or value is None:
            raise InvalidPageError(f"the last item of the page has no {self.field!r}")
        tie_break = self.tie_break if self.after_param is not None else None
        tie = None if tie_break is None else read(last, tie_break)
        return Step(has_more=more, token=TimestampPosition(value, None if tie is MISSING else tie))


PAGINATORS: Final[Mapping[str, type[Any]]] = {
    "link_header": LinkHeader,
    "next_url": NextUrl,
    "cursor": CursorParam,
    "starting_after": StartingAfter,
    "offset": OffsetLimit,
    "page_number": PageNumber,
    "keyset": Keyset,
}
"""The built-in paginators by the ``type`` name a TOML file gives them."""

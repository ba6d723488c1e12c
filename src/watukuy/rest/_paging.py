"""The paginator protocol and the records it works on.

A paginator makes two decisions on plain data: :meth:`Paginator.apply` turns the request
template's :class:`~watukuy.rest.Call` into the call for one :class:`Position`, and
:meth:`Paginator.step` reads an answer (:class:`Reply`) and says whether the listing goes on
and with which token (:class:`Step`). The built ``fetch`` sends, parses, and turns the step
into a ``wk.Page``; a paginator never sees the network. The built-in paginators are in
:mod:`watukuy.rest._paginate`; this module also holds the checks and readers they share.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from watukuy.cursor.path import MISSING, check_path, resolve_path
from watukuy.model.errors import ConfigError
from watukuy.model.page import InvalidPageError

from ._call import Call

__all__ = [
    "Kind",
    "Paginator",
    "Position",
    "Reply",
    "Step",
    "check_choice",
    "check_name",
    "check_optional_path",
    "check_path_option",
    "check_positive",
    "flag",
    "present",
    "read",
]

Kind: TypeAlias = Literal["page", "token", "keyset"]
"""What a paginator pages by: page numbers, tokens handed out by the API, or a keyset."""


@dataclass(frozen=True, slots=True)
class Position:
    """Where the request about to be sent stands.

    Attributes:
        page: The 1-based index of the page (within a full listing's pass, or within the
            cycle); page paginators turn it into their own numbering.
        token: For token paginators, the token to send (``None``: the first page); for
            :class:`Keyset`, a :class:`~watukuy.TimestampPosition`.
        cursor: ``ctx.cursor`` as the engine handed it (for a custom paginator under a
            custom ``cursor=``).
    """

    page: int = 1
    token: Any = None
    cursor: Any = None


@dataclass(frozen=True, slots=True)
class Reply:
    """A successful answer, as a paginator reads it.

    Attributes:
        call: The request that was sent.
        position: The position it was sent for.
        url: The URL the answer came from (relative next links are resolved against it).
        headers: The response headers (names looked up whatever their case).
        body: The decoded JSON body.
        items: The items taken out of the body (after ``transform``).
        identity: Reads an item's identity (what ``identity=`` describes).
    """

    call: Call
    position: Position
    url: str
    headers: Mapping[str, str]
    body: Any
    items: Sequence[Any]
    identity: Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class Step:
    """What a paginator read from an answer.

    Attributes:
        has_more: Whether there is a page after this one.
        token: The position of the next page for token and keyset paginators. A token
            paginator may return one with ``has_more=False`` too (a GraphQL ``endCursor`` on
            the last page): under ``mode="token"`` the next cycle continues after it.
    """

    has_more: bool
    token: Any = None


@runtime_checkable
class Paginator(Protocol):
    """How to ask for each page of a listing, and when it ends.

    Implement these four members to page an API none of the built-in paginators fits.
    Both methods are pure: no I/O, no state (a paginator is shared by every partition).
    """

    @property
    def kind(self) -> Kind:
        """``"page"``, ``"token"`` or ``"keyset"``: what :class:`Position` carries."""
        ...

    @property
    def ends_on_not_found(self) -> bool:
        """True when a ``404`` / ``416`` for a page after the first means the listing
        ended; False when it means the page is gone (the listing shrank)."""
        ...

    def apply(self, call: Call, position: Position) -> Call:
        """The call that asks for the page at ``position``."""
        ...

    def step(self, reply: Reply) -> Step:
        """Whether the listing goes on after this answer, and where."""
        ...


# --- checks ------------------------------------------------------------------------------


def check_name(value: object, field: str) -> str:
    """``value`` if it is a non-empty name (a query parameter), or a ConfigError naming ``field``."""
    if not isinstance(value, str) or not value:
        raise ConfigError(f"expected a non-empty name, got {value!r}", field=field)
    return value


def check_path_option(value: object, field: str) -> str:
    """``value`` if it is a usable dotted path, or a ConfigError naming ``field``."""
    problem = check_path(value)
    if problem:
        raise ConfigError(problem, field=field)
    return value  # type: ignore[return-value]  # check_path accepted it: a str


def check_optional_path(value: object, field: str) -> str | None:
    """``value`` if it is ``None`` or a usable dotted path."""
    return None if value is None else check_path_option(value, field)


def check_positive(value: object, field: str, *, minimum: int = 1) -> int:
    """``value`` if it is an integer at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"expected an integer >= {minimum}, got {value!r}", field=field)
    return value


def check_choice(value: object, field: str, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices``."""
    if value not in choices:
        listed = ", ".join(repr(choice) for choice in choices)
        raise ConfigError(f"expected one of {listed}, got {value!r}", field=field)
    return value


# --- reading answers ---------------------------------------------------------------------


def read(body: Any, path: str) -> Any:
    """The value at ``path`` in ``body``, or ``MISSING``."""
    return resolve_path(body, path)


def flag(body: Any, path: str) -> bool:
    """A has-more marker: a boolean, or a next link whose presence means more (Django REST
    Framework's ``next``, ``null`` on the last page). A path the body does not have, or a
    value of another kind, is a malformed answer, never a guess: reading it as "no more"
    would end every pass early."""
    value = read(body, path)
    if isinstance(value, bool):
        return value
    if value is None or isinstance(value, str):
        return present(value)
    raise InvalidPageError(
        f"expected true or false (or a next link, or null) at {path!r} in the body, got {value!r}"
    )


def present(value: Any) -> bool:
    """True for a value that is there: not missing, ``None`` or ``""``."""
    return value is not MISSING and value is not None and value != ""

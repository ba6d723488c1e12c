"""Dataset operations and direct listings, shared by the API and its tenant views.

A view is a vendor and a tenant name: every operation works on that tenant's dataset in
the vendor, and every direct listing goes through the vendor's counting, faults and log.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._items import (
    Dataset,
    PageResult,
    SinceResult,
    TokenResult,
    copy_item,
    decode_token,
    encode_token,
)
from ._items import positive_int as _positive
from ._vendor import Vendor

__all__ = ["FakeTenant", "TenantOps"]


class TenantOps:
    """Dataset operations and direct listings, shared by the API and its tenant views.

    A view is a vendor and a tenant name: every operation works on that tenant's dataset in
    the vendor, and every direct listing goes through the vendor's counting, faults and log.
    """

    _vendor: Vendor
    _name: str

    @property
    def name(self) -> str:
        """The tenant's name (``""`` for the default tenant)."""
        return self._name

    def _data(self) -> Dataset:
        return self._vendor._dataset(self._name)

    # --- dataset --------------------------------------------------------------------------

    def add(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """Insert a new item; returns a copy of what was stored.

        A missing ``updated_at`` is set to the clock's now and a missing ``version`` to 1;
        given values are kept (so tests can create ties on ``updated_at``).

        Raises:
            ConfigError: The item has no string ``id``, is not JSON data, or the id exists.
        """
        return self._data().add(item)

    def update(self, id: str, /, **changes: Any) -> dict[str, Any]:
        """Merge ``changes`` into an item; returns a copy of the result.

        ``version`` is bumped by one and ``updated_at`` set to the clock's now unless
        ``changes`` gives them (``update("item-001", updated_at=same)`` makes a tie).

        Raises:
            KeyError: No item has that id.
            ConfigError: The changes would change the item's id.
        """
        return self._data().update(id, changes)

    def remove(self, id: str) -> bool:
        """Delete an item; ``False`` when there was none. Listings never show deletions."""
        return self._data().remove(id)

    def get(self, id: str) -> dict[str, Any] | None:
        """A copy of one item, or ``None``. Not counted as a request."""
        return self._data().get(id)

    def all(self) -> list[dict[str, Any]]:
        """Copies of every item ordered by id. Not counted as a request."""
        return [copy_item(item) for item in self._data().all_raw()]

    def seed(self, items: Iterable[Mapping[str, Any]]) -> None:
        """Replace every item (missing ``updated_at``/``version`` filled as in :meth:`add`).

        Raises:
            ConfigError: An item is invalid, or two items share an id.
        """
        self._data().seed(items)

    def size(self) -> int:
        """Number of items."""
        return self._data().size()

    def clear(self) -> None:
        """Drop every item."""
        self._data().clear()

    # --- direct listings (each counts as one request) -------------------------------------

    def list_since(
        self, since: str | int | None = None, after_id: str | None = None, limit: int | None = None
    ) -> SinceResult:
        """Keyset listing over ``(updated_at, id)``, the way incremental APIs page.

        Returns items with ``updated_at >= since`` sorted by ``(updated_at, id)``. With
        ``after_id``, items whose ``updated_at`` *equals* ``since`` and whose id is
        ``<= after_id`` are skipped, so resuming from the last item of a page
        (``since=last["updated_at"], after_id=last["id"]``) neither repeats nor skips ties.
        ``since=None`` lists from the beginning (``after_id`` is then ignored). Items whose
        ``updated_at`` is not a time sort first and only appear when ``since`` is None.

        Like every direct listing it counts as a request: it is logged, takes queued
        faults (raising them: ``HttpError``, ``httpx.ConnectError``, ``httpx.ReadTimeout``,
        ``json.JSONDecodeError``) and counts against the rate limit. Latency applies to
        the HTTP faces only.

        Args:
            since: ISO 8601 time, epoch digits, or epoch ms; ``None`` from the beginning.
            after_id: Tie-break: the id of the last item already seen at ``since``.
            limit: Page size (default: the API's ``page_size``).

        Raises:
            ConfigError: ``since`` is not a time, or ``limit`` is not a positive integer.
        """
        query = {"since": since, "after_id": after_id, "limit": limit}

        def run(data: Dataset) -> SinceResult:
            size = self._vendor.page_size if limit is None else _positive(limit, "limit")
            rows, more = data.since(since, after_id if since not in (None, "") else None, size)
            return SinceResult([copy_item(row) for row in rows], more)

        return self._vendor._direct(self._name, ("items",), "since", query, run)

    def list_page(self, page: int = 1, page_size: int | None = None) -> PageResult:
        """Page ``page`` (1-based) of the listing ordered by id; past the end it is empty.

        Raises:
            ConfigError: ``page`` or ``page_size`` is not a positive integer.
        """
        query = {"page": page, "page_size": page_size}

        def run(data: Dataset) -> PageResult:
            number = _positive(page, "page")
            size = (
                self._vendor.page_size if page_size is None else _positive(page_size, "page_size")
            )
            rows, pages, more = data.page(number, size)
            return PageResult([copy_item(row) for row in rows], number, pages, more)

        return self._vendor._direct(self._name, ("items", "page"), "page", query, run)

    def list_token(self, token: str | None = None, limit: int | None = None) -> TokenResult:
        """The id-ordered listing paged by opaque tokens; ``next`` is ``None`` at the end.

        A token resumes *after the last id it saw*, so items added or removed between
        pages never cause a repeat or a skip of the items that stay.

        Raises:
            ConfigError: The token was not issued by this API, or ``limit`` is invalid.
        """
        query = {"cursor": token, "limit": limit}

        def run(data: Dataset) -> TokenResult:
            size = self._vendor.page_size if limit is None else _positive(limit, "limit")
            after = decode_token(token) if token else None
            rows, last = data.after(after, size)
            next_token = None if last is None else encode_token(last)
            return TokenResult([copy_item(row) for row in rows], next_token)

        return self._vendor._direct(self._name, ("items", "token"), "token", query, run)

    def list_all(self) -> list[dict[str, Any]]:
        """Every item ordered by id, as one request (a snapshot-style endpoint)."""

        def run(data: Dataset) -> list[dict[str, Any]]:
            return [copy_item(row) for row in data.all_raw()]

        return self._vendor._direct(self._name, ("items", "all"), "all", {}, run)


class FakeTenant(TenantOps):
    """One tenant of a :class:`FakeApi`: the same dataset operations and listings, served
    over HTTP under ``/t/{name}``. Get one with ``api.tenant(name)``."""

    def __init__(self, api: Vendor, name: str) -> None:
        self._vendor = api
        self._name = name

    def __repr__(self) -> str:
        return f"FakeTenant({self._name!r}, size={self.size()})"

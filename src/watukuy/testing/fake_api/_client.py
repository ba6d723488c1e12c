"""A blocking client for the control API of a served fake (another process, or a thread)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

import httpx

from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError

from ._faults import (
    FaultKind,
    RateLimitScope,
    RateLimitStyle,
    ResetFormat,
    RetryAfter,
    format_retry_after,
)

__all__ = ["FakeApiClient", "FakeTenantClient"]


def _retry_after_json(value: RetryAfter | None) -> float | str | None:
    """``Retry-After`` in a form JSON can carry (the server sends strings verbatim)."""
    if isinstance(value, dt.datetime):
        return format_retry_after(value)
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return value


class _TenantCalls:
    _client: FakeApiClient
    _name: str

    def add(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """Insert an item (as ``FakeApi.add``); returns what the server stored."""
        result: dict[str, Any] = self._client._post("add", tenant=self._name, item=dict(item))
        return result

    def update(self, id: str, /, **changes: Any) -> dict[str, Any]:
        """Change an item (as ``FakeApi.update``); ``KeyError`` when it does not exist."""
        result: dict[str, Any] = self._client._post(
            "update", tenant=self._name, id=id, changes=changes
        )
        return result

    def remove(self, id: str) -> bool:
        """Delete an item; ``False`` when there was none."""
        return bool(self._client._post("remove", tenant=self._name, id=id)["removed"])

    def get(self, id: str) -> dict[str, Any] | None:
        """One item, or ``None``."""
        try:
            result: dict[str, Any] = self._client._get("item", tenant=self._name, id=id)
        except KeyError:
            return None
        return result

    def all(self) -> list[dict[str, Any]]:
        """Every item ordered by id."""
        data: list[dict[str, Any]] = self._client._get("items", tenant=self._name)["data"]
        return data

    def seed(self, items: Iterable[Mapping[str, Any]]) -> None:
        """Replace every item."""
        self._client._post("seed", tenant=self._name, items=[dict(item) for item in items])

    def size(self) -> int:
        """Number of items."""
        return int(self._client._get("size", tenant=self._name)["size"])

    def clear(self) -> None:
        """Drop every item."""
        self._client._post("clear", tenant=self._name)


class FakeTenantClient(_TenantCalls):
    """The dataset operations of one tenant of a served fake (``client.tenant(name)``)."""

    def __init__(self, client: FakeApiClient, name: str) -> None:
        self._client = client
        self._name = name


class FakeApiClient(_TenantCalls):
    """Drive a served :class:`~watukuy.testing.FakeApi` through its control API.

    The methods mirror the in-process API (dataset operations on the default tenant,
    ``tenant(name)`` for the others, faults and knobs) and block, so a test can mutate
    the dataset of a server that a child process is polling. Do not call it from the event
    loop that runs the server itself: use another thread (``asyncio.to_thread``).

    Args:
        url: The served API's URL (``server.url``, or what ``python -m
            watukuy.testing.fake_api`` printed).
        timeout: Seconds to wait for each control request.
        client_id: Sent as ``x-client-id`` (control requests are not logged; this is for
            proxies and debugging).

    Raises on every call:
        ConfigError: The server rejected the arguments (400).
        KeyError: The item does not exist (404).
        LookupError: The tenant does not exist (404).
    """

    def __init__(self, url: str, *, timeout: float = 10.0, client_id: str | None = None) -> None:
        self.url = url.rstrip("/")
        headers = {"x-client-id": client_id} if client_id else {}
        self._http = httpx.Client(
            base_url=self.url + "/_control/", timeout=timeout, headers=headers
        )
        self._client = self
        self._name = ""

    def tenant(self, name: str) -> FakeTenantClient:
        """The view of tenant ``name`` (created on the server by the first mutation)."""
        return FakeTenantClient(self, name)

    def tenants(self) -> list[str]:
        """Every tenant's name, sorted."""
        names: list[str] = self._get("tenants")["tenants"]
        return names

    # --- faults and knobs ---------------------------------------------------------------

    def fail_next(
        self,
        status: int | FaultKind = 500,
        *,
        times: int = 1,
        retry_after: RetryAfter | None = None,
        problem: Mapping[str, Any] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        path: str | None = None,
    ) -> None:
        """Script failures (as ``FakeApi.fail_next``; ``bytes`` bodies are sent as text)."""
        args: dict[str, Any] = {"status": status, "times": times}
        optional = {
            "retry_after": _retry_after_json(retry_after),
            "problem": None if problem is None else dict(problem),
            "body": body.decode() if isinstance(body, bytes) else body,
            "headers": None if headers is None else dict(headers),
            "path": path,
        }
        args.update({k: v for k, v in optional.items() if v is not None})
        self._post("fail_next", **args)

    def pending_faults(self) -> int:
        """Scripted faults not yet taken."""
        return int(self.stats()["pending_faults"])

    def clear_faults(self) -> None:
        """Drop every scripted fault."""
        self._post("clear_faults")

    def set_latency(self, latency: Duration) -> None:
        """Delay every request (a number means seconds)."""
        self._post("set_latency", latency=f"{parse_duration(latency, 'latency')}ms")

    def set_rate_limit(
        self,
        style: RateLimitStyle | None = "ietf",
        *,
        limit: int = 100,
        window: Duration = "60s",
        reset: ResetFormat | None = None,
        reset_after: bool = False,
        per: RateLimitScope = "api",
    ) -> None:
        """Limit requests (as ``FakeApi.set_rate_limit``)."""
        self._post(
            "set_rate_limit",
            style=style,
            limit=limit,
            window=f"{parse_duration(window, 'window')}ms",
            reset=reset,
            reset_after=reset_after,
            per=per,
        )

    def set_etags(self, enabled: bool = True) -> None:
        """Turn ETags and ``304`` answers on or off."""
        self._post("set_etags", enabled=enabled)

    def set_last_modified(self, enabled: bool = True) -> None:
        """Turn ``Last-Modified`` / ``If-Modified-Since`` on or off."""
        self._post("set_last_modified", enabled=enabled)

    def reset_stats(self) -> None:
        """Zero the call count and empty the log."""
        self._post("reset_stats")

    def log(self, after: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        """Request records with ``seq > after`` (see ``RequestRecord.to_dict``)."""
        params: dict[str, Any] = {"after": after}
        if limit is not None:
            params["limit"] = limit
        entries: list[dict[str, Any]] = self._get("log", **params)["entries"]
        return entries

    def stats(self) -> dict[str, Any]:
        """``calls``, ``pending_faults``, ``last_seq``, ``log_size``, ``latency_ms``,
        ``tenants`` (count) and ``items`` (count over every tenant)."""
        result: dict[str, Any] = self._get("stats")
        return result

    @property
    def calls(self) -> int:
        """Requests the server has served."""
        return int(self.stats()["calls"])

    # --- plumbing -----------------------------------------------------------------------

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()

    def __enter__(self) -> FakeApiClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FakeApiClient({self.url!r})"

    def _post(self, action: str, **body: Any) -> Any:
        return self._check(self._http.post(action, json=body))

    def _get(self, action: str, **params: Any) -> Any:
        return self._check(self._http.get(action, params=params))

    @staticmethod
    def _check(response: httpx.Response) -> Any:
        if response.status_code < 400:
            return response.json()
        detail = response.text
        try:
            detail = str(response.json().get("detail", detail))
        except ValueError:
            pass
        if response.status_code == 400:
            raise ConfigError(detail)
        if response.status_code == 404 and detail.startswith("no item "):
            raise KeyError(detail.removeprefix("no item ").strip("'\""))
        if response.status_code == 404:
            raise LookupError(detail)
        response.raise_for_status()
        return None

"""The pages and the one action endpoint of the admin app.

``GET /`` the overview, ``GET /key?poller=&partition=`` one key, ``GET /parked`` every key
with parked rows, ``POST /action`` every change (a form field ``action`` names it), and
``/static/`` the stylesheet and the script. Keys travel as query parameters and form fields,
never in the path, so any partition text (slashes, spaces, any script) addresses its key.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from watukuy.budget.manager import describe_usage
from watukuy.cursor.strategy import listing_caught_up
from watukuy.model import json as wkjson
from watukuy.model.errors import WatukuyError
from watukuy.model.rows import ParkedKind, PKey

from . import _format
from ._backend import Backend
from ._index import SORTS, STATUSES, KeyIndex, LagHistory, OverviewQuery
from ._security import SESSION_COOKIE, Confirmations, Csrf

__all__ = ["Pages", "PagesConfig"]

_log = logging.getLogger("watukuy")

_FLASH_COOKIE = "watukuy_admin_flash"
_LIVE_HEADER = "x-watukuy-live"
DESTRUCTIVE = frozenset({"reset", "discard", "deletes_confirm", "deletes_discard"})
"""Actions done only by a second request carrying the token of their confirmation page:
resetting a cursor (with or without clearing the snapshot), discarding parked rows,
confirming held deletes (they go out) and discarding them (the pass's finding is lost)."""
_NOT_CONFIRMED = {"csrf", "confirm", "confirmed", "back", "ids", "action", "poller", "partition"}
_BACK = {"key", "parked", "overview"}
_PARKED_ON_KEY_PAGE = 100
_PARKED_PER_KEY = 20
_PARKED_KEYS = 50
_LOG_LINES = 25
_MAX_FORM = 1_000_000


@dataclass(frozen=True, slots=True)
class PagesConfig:
    """Options of the pages (validated by ``admin_app``)."""

    title: str
    page_size: int
    refresh_s: float
    open_access: bool


def _environment() -> Environment:
    folder = resources.files("watukuy.integrations.admin") / "templates"
    env = Environment(
        loader=FileSystemLoader(str(folder)),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        duration=_format.duration,
        budget_use=describe_usage,
        when=_format.when,
        cursor=_format.cursor_text,
        json=_format.json_text,
    )
    env.globals.update(ago=_format.ago, STATUSES=STATUSES, SORTS=SORTS)
    return env


class Pages:
    """The request handlers, sharing one backend, index and template environment.

    Args:
        backend: What the pages read and do.
        csrf: The form tokens.
        config: Title, page size, refresh period, whether access is open.
        index_ttl_ms: Longest age of the snapshot behind sorted and filtered views.
    """

    def __init__(
        self, backend: Backend, csrf: Csrf, config: PagesConfig, index_ttl_ms: int
    ) -> None:
        self.backend = backend
        self.csrf = csrf
        self.confirmations = Confirmations(csrf)
        self.config = config
        self.history = LagHistory()
        self.index = KeyIndex(backend, index_ttl_ms, self.history)
        self.env = _environment()

    # --- rendering --------------------------------------------------------------------------

    def _render(
        self, request: Request, template: str, status_code: int = 200, **context: Any
    ) -> Response:
        session = request.cookies.get(SESSION_COOKIE)
        new_session = session is None or len(session) > 100
        if new_session:
            session = self.csrf.new_session()
        assert session is not None
        base = request.scope.get("root_path", "")
        flash = None if request.headers.get(_LIVE_HEADER) else _read_flash(request)
        now = self.backend.clock.now()
        html = self.env.get_template(template).render(
            base=base,
            csrf=self.csrf.token(session),
            config=self.config,
            mode=self.backend.mode,
            instance_id=self.backend.instance_id,
            now=now,
            flash=flash,
            url=lambda path, **params: _url(base, path, params),
            key_url=lambda key: _url(
                base, "/key", {"poller": key.poller, "partition": key.partition}
            ),
            **context,
        )
        response = HTMLResponse(html, status_code=status_code)
        cookie_path = base or "/"
        if new_session:
            response.set_cookie(
                SESSION_COOKIE, session, httponly=True, samesite="strict", path=cookie_path
            )
        if flash is not None:
            response.delete_cookie(_FLASH_COOKIE, path=cookie_path)
        return response

    # --- pages ------------------------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        """Every key, paged, sortable and filterable."""
        query = OverviewQuery.parse(request.query_params)
        overview = await self.index.page(query, self.config.page_size)
        sparks = {
            row.key: _format.sparkline(self.history.readings(row.key)) for row in overview.rows
        }
        return self._render(
            request,
            "overview.html",
            query=query,
            overview=overview,
            sparks=sparks,
        )

    async def key(self, request: Request) -> Response:
        """One key: cursors, schedule, last error, lag chart, actions, parked rows, events."""
        key = _key_of(request.query_params)
        if key is None or not self.backend.knows(key):
            return self._not_found(request, "no such key")
        backend = self.backend
        now = backend.clock.now()
        state = await backend.store.load_state(key)
        if state is None and backend.engine is None:
            return self._not_found(request, "the store holds no such key")
        summary = await backend.summary(key, now)
        self.history.record(key, now, summary.lag_ms)
        parked = await backend.operator.parked_list(
            key.poller, partition=key.partition or None, kind=None, limit=_PARKED_ON_KEY_PAGE
        )
        events = await backend.recent_events(key, state, _LOG_LINES)
        definition = None if backend.engine is None else backend.engine.pollers.get(key.poller)
        return self._render(
            request,
            "key.html",
            key=key,
            summary=summary,
            state=state,
            cursors=backend.cursors(key, state, now),
            live_caught_up=state is not None
            and listing_caught_up(state.schedule.last_poll, state.schedule.last_error),
            schedule=backend.schedule(state),
            held=backend.held(state),
            late=backend.late(key, state),
            parked=[self._parked_view(row) for row in parked],
            events=events,
            has_log=(definition is not None and definition.log is not None)
            or (definition is None and bool(events)),
            chart=_format.lag_chart(self.history.readings(key), has_lag=summary.lag_ms is not None),
            can_backfill=backend.can_backfill(key.poller),
            grace_ms=backend.overdue_grace_ms,
        )

    async def parked(self, request: Request) -> Response:
        """Every key with parked rows (from the snapshot), with their rows."""
        rows = await self.index.rows(wait=True) or []
        with_parked = sorted(
            (row for row in rows if row.parked), key=lambda row: (-row.parked, row.key.poller)
        )
        sections = []
        for row in with_parked[:_PARKED_KEYS]:
            listed = await self.backend.operator.parked_list(
                row.key.poller,
                partition=row.key.partition or None,
                kind=None,
                limit=_PARKED_PER_KEY,
            )
            sections.append((row, [self._parked_view(item) for item in listed]))
        return self._render(
            request,
            "parked.html",
            sections=sections,
            more=max(0, len(with_parked) - _PARKED_KEYS),
            snapshot_at=self.index.taken_at,
        )

    def _parked_view(self, row: Any) -> dict[str, Any]:
        backend = self.backend
        event = backend.clean_json(row.event)
        error = backend.clean_error(dict(row.error))
        history = error.pop("history", None)
        what = "invalid item"
        if isinstance(event, Mapping):
            what = f"{event.get('type', '?')} {event.get('subject', '')}"
        return {
            "id": row.id,
            "kind": row.kind,
            "attempts": row.attempts,
            "parked_at": row.parked_at,
            "hold_key": row.hold_key,
            "what": what,
            "event": event,
            "item": backend.clean_json(row.item),
            "error": error,
            "history": history,
        }

    def guarded(
        self, handler: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """``handler``, answering 503 with one cleaned line when the store fails."""

        async def guarded_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as error:
                _log.warning("admin page: %s failed: %s", request.url.path, type(error).__name__)
                message = self.backend.redaction.text(str(error))
                return self._render(
                    request,
                    "message.html",
                    status_code=503,
                    heading="The store did not answer",
                    message=f"{type(error).__name__}: {message}",
                )

        return guarded_handler

    def _not_found(self, request: Request, message: str) -> Response:
        return self._render(
            request, "message.html", status_code=404, heading="Not found", message=message
        )

    # --- the action endpoint ----------------------------------------------------------------

    async def action(self, request: Request) -> Response:
        """Every change: checked for its CSRF token, confirmed when destructive, then done.

        A destructive action (:data:`DESTRUCTIVE`) without a confirmation token only renders
        its confirmation page, with a token for exactly that form; with a token that is not
        valid (spent, expired, of another session or another form) it is refused.
        """
        form = await _read_form(request)
        if form is None:
            return PlainTextResponse("expected a form of at most 1 MB", status_code=400)
        session = request.cookies.get(SESSION_COOKIE)
        if not self.csrf.valid(session, form.get("csrf")):
            return PlainTextResponse(
                "forbidden: the form's CSRF token is missing or does not match this browser's "
                "session; reload the page and try again",
                status_code=403,
            )
        form = _one_row(form)
        name = str(form.get("action", ""))
        key = _key_of(form)
        if key is None or not self.backend.knows(key):
            return self._not_found(request, "no such key")
        back = str(form.get("back", "key"))
        if back not in _BACK:
            back = "key"
        if name in DESTRUCTIVE:
            token = form.get("confirm")
            if not token:
                return await self._confirm(request, name, key, form, back)
            assert session is not None  # the CSRF check needs one
            if not self.confirmations.redeem(
                session, token, _confirmed_form(name, key, form), self.backend.clock.now()
            ):
                return self._render(
                    request,
                    "message.html",
                    status_code=403,
                    heading="Confirmation refused",
                    message="this confirmation was used already, has expired or belongs to "
                    "another form: start the action again from the key's page",
                )
        try:
            kind, text = "ok", await self._perform(name, key, form)
        except _Refused as refused:
            kind, text = "error", str(refused)
        except WatukuyError as error:
            kind, text = "error", f"{name} failed: {self.backend.redaction.text(error.message)}"
        except Exception as error:
            # The store-only operators report a bad key or cursor with their own errors.
            _log.warning("admin page: %s on %s failed: %s", name, key, type(error).__name__)
            message = getattr(error, "message", str(error))
            kind, text = "error", f"{name} failed: {self.backend.redaction.text(str(message))}"
        self.index.invalidate()
        base = request.scope.get("root_path", "")
        if back == "key":
            target = _url(base, "/key", {"poller": key.poller, "partition": key.partition})
        elif back == "parked":
            target = _url(base, "/parked", {})
        else:
            target = _url(base, "/", {})
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            _FLASH_COOKIE,
            _encode_flash(kind, text),
            httponly=True,
            samesite="strict",
            path=base or "/",
        )
        return response

    async def _confirm(
        self, request: Request, name: str, key: PKey, form: FormData, back: str
    ) -> Response:
        fields = {
            field: str(value)
            for field, value in form.multi_items()
            if field not in ("csrf", "confirm", "confirmed") and isinstance(value, str)
        }
        ids = [str(value) for value in form.getlist("ids")]
        fields.pop("ids", None)
        if name == "discard" and not ids and form.get("scope") != "all":
            return self._render(
                request,
                "message.html",
                status_code=400,
                heading="Nothing selected",
                message="tick the parked rows to discard first",
            )
        session = request.cookies.get(SESSION_COOKIE)
        assert session is not None  # the CSRF check needs one
        token = self.confirmations.issue(
            session, _confirmed_form(name, key, form), self.backend.clock.now()
        )
        return self._render(
            request,
            "confirm.html",
            action=name,
            key=key,
            fields=fields,
            ids=ids,
            back=back,
            confirm=token,
        )

    async def _perform(self, name: str, key: PKey, form: FormData) -> str:
        operator = self.backend.operator
        poller, partition = key.poller, key.partition or None
        if name == "trigger":
            await operator.trigger(poller, partition)
            return "Triggered: the key is due now (an open circuit gets a probe)."
        if name == "pause":
            await operator.pause(poller, partition)
            return "Paused: the key is neither polled nor delivered until resumed."
        if name == "resume":
            await operator.resume(poller, partition)
            return "Resumed: the key is due now."
        if name == "reset":
            to = _optional_text(form.get("to"))
            clear = form.get("clear_snapshot") == "on"
            await operator.reset_cursor(poller, to, clear_snapshot=clear, partition=partition)
            where = "the initial cursor" if to is None else repr(to)
            return f"Live cursor reset to {where}" + (", snapshot cleared." if clear else ".")
        if name == "backfill":
            engine = self.backend.engine
            if engine is None:
                raise _Refused(
                    "backfill needs the poller definitions: serve the page with the engine"
                )
            raw = str(form.get("from", "")).strip()
            if not raw:
                raise _Refused(
                    "backfill: give a start (a date or cursor, or null for the very beginning)"
                )
            start = None if raw.lower() == "null" else raw
            to = _optional_text(form.get("to"))
            force = form.get("force") == "on"
            await engine.backfill(poller, start, to, force, partition=partition)
            origin = "the very beginning" if start is None else start
            return f"Backfill started from {origin}" + (f" to {to}" if to else "") + "."
        if name in ("retry", "discard"):
            ids = [str(value) for value in form.getlist("ids")]
            if form.get("scope") == "all":
                kind: ParkedKind | None = "poison" if name == "retry" else None
                rows = await operator.parked_list(
                    poller, partition=partition, kind=kind, limit=None
                )
                ids = [row.id for row in rows]
            if not ids:
                raise _Refused(f"{name}: no parked rows selected")
            if name == "retry":
                moved = await operator.parked_retry(poller, ids, partition=partition)
                return f"Retried {moved} parked event(s): back in the outbox, delivered next."
            dropped = await operator.parked_discard(poller, ids, partition=partition)
            return f"Discarded {dropped} parked row(s)."
        if name == "deletes_confirm":
            count = await operator.deletes_confirm(poller, partition=partition)
            return f"Confirmed {count} held delete(s): the key's next run emits them."
        if name == "deletes_discard":
            count = await operator.deletes_discard(poller, partition=partition)
            return f"Discarded {count} held delete(s): nothing is emitted."
        raise _Refused(f"unknown action {name!r}")


class _Refused(Exception):
    """An action the page will not perform, with the reason to show."""


async def _read_form(request: Request) -> FormData | None:
    """The URL-encoded body of a form (the page's forms send nothing else), or ``None``
    when it is too large; parsed here so that no multipart parser is needed."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > _MAX_FORM:
            return None
    pairs: list[tuple[str, str | UploadFile]] = list(
        parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
    )
    return FormData(pairs)


def _one_row(form: FormData) -> FormData:
    """A row's own button (``one=retry <id>``) acts on that row alone, whatever is ticked."""
    one = form.get("one")
    if not isinstance(one, str) or " " not in one:
        return form
    action, _, row_id = one.partition(" ")
    kept = [
        (name, value) for name, value in form.multi_items() if name not in ("one", "ids", "action")
    ]
    return FormData([*kept, ("action", action), ("ids", row_id)])


def _confirmed_form(name: str, key: PKey, form: FormData) -> str:
    """The canonical text of what a confirmation confirms: the action, the key and every
    field that shapes it (the ticked rows in any order), as the confirmation page posts
    them back."""
    fields = sorted(
        {
            field: value
            for field, value in form.multi_items()
            if isinstance(value, str) and field not in _NOT_CONFIRMED
        }.items()
    )
    ids = sorted(str(value) for value in form.getlist("ids"))
    return wkjson.dumps(
        {"action": name, "key": [key.poller, key.partition], "fields": fields, "ids": ids}
    )


def _optional_text(value: object) -> str | None:
    text = str(value or "").strip()
    return None if not text or text.lower() == "null" else text


def _key_of(params: Mapping[str, Any]) -> PKey | None:
    poller = params.get("poller")
    partition = params.get("partition", "")
    if not isinstance(poller, str) or not poller or not isinstance(partition, str):
        return None
    return PKey(poller, partition)


def _url(base: str, path: str, params: Mapping[str, Any]) -> str:
    query = urlencode({name: value for name, value in params.items() if value is not None})
    return f"{base}{path}" + (f"?{query}" if query else "")


def _encode_flash(kind: str, text: str) -> str:
    raw = wkjson.dumps({"kind": kind, "text": text[:500]}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _read_flash(request: Request) -> dict[str, str] | None:
    value = request.cookies.get(_FLASH_COOKIE)
    if not value:
        return None
    try:
        data = wkjson.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("text"), str):
        return None
    return {"kind": "error" if data.get("kind") == "error" else "ok", "text": data["text"]}

"""One redaction policy for every text watukuy makes: errors, logs, hook records, routes.

Secrets reach watukuy in URLs (user info, query parameters), in request headers and in
whatever text an exception carries. A :class:`Redaction` decides which names are
sensitive and masks their values with ``***`` where the text is made, so nothing
downstream (the store, hooks, OpenTelemetry, the CLI, the health routes) ever sees them:

- the password in the user info of every URL (``https://svc:***@api.example.com``), and
  a lone user name of a web URL, often a token (``https://***@github.com``);
- query parameters, fragment parameters, headers, mapping keys and ``name=value`` /
  ``name: value`` pairs in free text whose name is sensitive;
- ``Bearer <token>`` and ``Basic <credentials>`` wherever they appear;
- literal values and regular expressions you add.

A name is sensitive when, lower-cased, it is one of :data:`SENSITIVE_NAMES`, contains one
of :data:`SENSITIVE_PARTS` (so ``x-foo-token`` and ``client_secret`` are caught), or ends
in ``-key`` / ``_key``. Pass ``Engine(redact=Redaction(names=[...]))`` to add your own,
``allow=[...]`` to keep a name visible.

This module is pure (no I/O); the HTTP adapter re-exports it as ``watukuy.http``.
"""

from __future__ import annotations

import logging
import re
import sys
import traceback
from collections.abc import Iterable, Mapping
from typing import Any, Final

from .errors import ConfigError, SerializedError, ValidationError

__all__ = [
    "DEFAULT_REDACTION",
    "REDACTED",
    "SENSITIVE_NAMES",
    "SENSITIVE_PARTS",
    "Redaction",
    "RedactingLogger",
    "describe_error",
    "format_stack",
    "redact_text",
    "redact_url",
    "relative_source_path",
    "serialize_error",
]

REDACTED: Final = "***"
"""What a redacted value is replaced with."""

SENSITIVE_NAMES: Final[frozenset[str]] = frozenset(
    {"key", "sig", "pass", "pwd", "code_verifier", "client_assertion", "x-amz-security-token"}
)
"""Names (lower case) that are sensitive when they match exactly."""

SENSITIVE_PARTS: Final[tuple[str, ...]] = (
    "token",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "signature",
    "apikey",
    "api_key",
    "api-key",
    "accesskey",
    "access_key",
    "access-key",
    "auth",
    "cookie",
    "session",
    "credential",
    "private",
    "jwt",
)
"""Substrings (lower case) that make any name containing them sensitive: ``auth`` covers
``authorization``, ``proxy-authorization``, ``x-auth-token`` and ``oauth_*``."""

_KEY_SUFFIXES: Final = ("-key", "_key")
# watukuy's own vocabulary ends in "_key" too; those names never carry a credential.
_OWN_NAMES: Final = frozenset(
    {"ordering_key", "hold_key", "partition_key", "idempotency-key", "idempotency_key"}
)

_WEB_SCHEMES: Final = frozenset({"http", "https", "ws", "wss"})
_URL: Final = re.compile(r"\b([A-Za-z][A-Za-z0-9+.\-]*)://([^\s\"'<>`\\]+)")
_PERCENT: Final = re.compile(r"%([0-9A-Fa-f]{2})")
# ``name=value``, ``name: value``, ``"name": "value"``, ``'name': 'value'``; the value stops
# at whitespace, a quote or a separator, and takes the credential after an auth scheme.
_PAIR: Final = re.compile(
    r"(?P<name>[A-Za-z0-9_.\-]+)(?P<q1>[\"']?)(?P<sep>[ \t]*[=:][ \t]*)(?P<q2>[\"']?)"
    r"(?P<value>(?:(?i:bearer|basic|digest|token|negotiate|hmac)[ \t]+)?[^\s&,;)\]}\"']+)"
)
# A ``name: word`` pair that opens a sentence (``--token: use at least 12 characters``,
# ``secret: expected a string``) is a message about the name, not its value: an unquoted
# value after a colon that is one of the words our messages open with, followed by more
# words. The list is closed on purpose: a secret that happens to be a lower-case word
# followed by prose (``password: hunter was refused``) is still masked.
_SENTENCE_OPENERS: Final = frozenset(
    {
        "a", "an", "the", "use", "expected", "expects", "must", "should", "is", "are",
        "was", "not", "no", "missing", "required", "needs", "cannot", "can", "got",
        "unknown", "invalid", "empty", "at", "give", "set", "see", "only", "too",
    }
)  # fmt: skip
_MORE_WORDS: Final = re.compile(r"[ \t]+[A-Za-z]")
# ``('name', 'value')``: header lists and tuples in reprs.
_TUPLE: Final = re.compile(
    r"(?P<q1>[\"'])(?P<name>[A-Za-z0-9_.\-]+)(?P=q1),[ \t]*(?P<q2>[\"'])(?P<value>[^\"']*)(?P=q2)"
)
_SCHEME: Final = re.compile(
    r"\b(?P<scheme>(?i:bearer|basic))[ \t]+(?P<value>[A-Za-z0-9\-._~+/]{8,}=*)"
)
# Names already judged, per policy (header and parameter names repeat endlessly).
_CACHE_SIZE: Final = 4096
# Nested mappings are followed this deep (a request dict holding headers).
_MAX_DEPTH: Final = 4


def _unquote(text: str) -> str:
    return _PERCENT.sub(lambda m: chr(int(m.group(1), 16)), text) if "%" in text else text


def _config_error(message: str, field: str) -> Exception:
    return ConfigError(message, field=field)


def _strings(values: object, field: str) -> list[str]:
    """A list of non-empty strings (one string counts as a list of one)."""
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, Iterable):
        raise _config_error(f"expected a list of strings, got {values!r}", field)
    out = list(values)
    for value in out:
        if not isinstance(value, str) or not value.strip():
            raise _config_error(f"expected non-empty strings, got {value!r}", field)
    return out


def _names(values: object, field: str) -> frozenset[str]:
    return frozenset(value.strip().lower() for value in _strings(values, field))


class Redaction:
    """Which names and values are secrets, and how text is cleaned of them.

    The defaults catch the usual credentials; every argument adds to them. Example::

        engine = wk.Engine(
            store=store,
            pollers=[orders],
            redact=wk.Redaction(names=["x-tenant"], values=[os.environ["ERP_TOKEN"]]),
        )

    Args:
        names: More sensitive names, matched exactly and case-insensitively (query
            parameters, headers, mapping keys, ``name=value`` pairs in text).
        parts: More substrings that make a name sensitive wherever they appear in it.
        allow: Names never redacted, even when a default rule matches them (``"key"``
            when your API uses it for something public).
        values: Literal secrets masked wherever they appear in any text.
        patterns: Regular expressions whose matches are masked in any text.

    Raises:
        ConfigError: An argument is not a list of non-empty strings (or patterns).
    """

    __slots__ = (
        "__weakref__",
        "_allow",
        "_cache",
        "_hint",
        "_names",
        "_parts",
        "_parts_re",
        "_patterns",
        "_values",
    )

    def __init__(
        self,
        names: Iterable[str] = (),
        *,
        parts: Iterable[str] = (),
        allow: Iterable[str] = (),
        values: Iterable[str] = (),
        patterns: Iterable[str | re.Pattern[str]] = (),
    ) -> None:
        self._names = SENSITIVE_NAMES | _names(names, "redact.names")
        self._parts = SENSITIVE_PARTS + tuple(sorted(_names(parts, "redact.parts")))
        self._allow = _names(allow, "redact.allow")
        if isinstance(values, str):
            # One secret passed bare would be masked letter by letter: refuse it.
            raise _config_error(f"expected a list of strings, got {values!r}", "redact.values")
        literal = _strings(values, "redact.values")
        # Longest first, so a secret containing another is masked whole.
        self._values = tuple(sorted(set(literal), key=len, reverse=True))
        compiled: list[re.Pattern[str]] = []
        for pattern in [patterns] if isinstance(patterns, str) else patterns:
            try:
                compiled.append(pattern if isinstance(pattern, re.Pattern) else re.compile(pattern))
            except (re.error, TypeError) as error:
                raise _config_error(
                    f"expected regular expressions, got {pattern!r} ({error})", "redact.patterns"
                ) from None
        self._patterns = tuple(compiled)
        self._parts_re = re.compile("|".join(map(re.escape, self._parts)))
        # Text without any of these words holds no name=value secret: the common case
        # (a URL with harmless parameters, most stacks) skips the pair scan entirely.
        self._hint = tuple(sorted({*self._names, *self._parts, "key", "bearer", "basic"}))
        self._cache: dict[str, bool] = {}

    @classmethod
    def coerce(cls, value: Redaction | Iterable[str] | None, field: str = "redact") -> Redaction:
        """``None`` (the defaults), a :class:`Redaction`, or a list of extra names."""
        if value is None:
            return DEFAULT_REDACTION
        if isinstance(value, Redaction):
            return value
        if isinstance(value, str) or not isinstance(value, Iterable):
            raise _config_error(
                f"expected a Redaction or a list of header/parameter names, got {value!r}", field
            )
        return cls(names=value)

    def is_sensitive(self, name: object) -> bool:
        """True when values under ``name`` (a header, parameter or key) must be masked."""
        if not isinstance(name, str):
            return False
        known = self._cache.get(name)
        if known is not None:
            return known
        lowered = name.strip().lower()
        if not lowered or lowered in self._allow:
            verdict = False
        elif lowered in self._names or self._parts_re.search(lowered) is not None:
            verdict = True
        else:
            verdict = lowered.endswith(_KEY_SUFFIXES) and lowered not in _OWN_NAMES
        if len(self._cache) >= _CACHE_SIZE:
            self._cache.clear()
        self._cache[name] = verdict
        return verdict

    # --- text -----------------------------------------------------------------------------

    def url(self, url: str) -> str:
        """One URL with its user info and sensitive parameters masked.

        ``https://svc:pw@api.test/items?api_key=k&page=2`` becomes
        ``https://svc:***@api.test/items?api_key=***&page=2``. Text that is not a URL is
        cleaned like any other text.
        """
        return self.text(str(url))

    def text(self, text: str) -> str:
        """Any text (an error message, a stack, a log line) with every secret masked."""
        if not text:
            return text
        for value in self._values:
            if value in text:
                text = text.replace(value, REDACTED)
        for pattern in self._patterns:
            text = pattern.sub(REDACTED, text)
        if "://" in text:
            text = _URL.sub(self._url_match, text)
        lowered = text.lower()
        if not any(word in lowered for word in self._hint):
            return text
        if "=" in text or ":" in text:
            text = self._pairs(text)
        if "," in text:
            text = _TUPLE.sub(self._tuple_match, text)
        return _SCHEME.sub(lambda m: f"{m.group('scheme')} {REDACTED}", text)

    def _url_match(self, match: re.Match[str]) -> str:
        scheme, rest = match.group(1), match.group(2)
        cut = len(rest)
        for mark in "/?#":
            index = rest.find(mark)
            if index != -1:
                cut = min(cut, index)
        authority, tail = rest[:cut], rest[cut:]
        if "@" in authority:
            userinfo, _, host = authority.rpartition("@")
            user, colon, password = userinfo.partition(":")
            if colon and password:
                masked = f"{user}:{REDACTED}"
            elif scheme.lower() in _WEB_SCHEMES:
                masked = REDACTED  # https://<token>@host: the user name is the credential
            else:
                masked = userinfo  # postgresql://app@db: a role name, not a secret
            authority = f"{masked}@{host}"
        if "?" in tail or "#" in tail:
            path, fragment_mark, fragment = tail.partition("#")
            base, query_mark, query = path.partition("?")
            tail = base + query_mark + self._params(query) + fragment_mark + self._params(fragment)
        return f"{scheme}://{authority}{tail}"

    def _params(self, query: str) -> str:
        if "=" not in query:
            return query
        parts = []
        for part in query.split("&"):
            name, eq, _ = part.partition("=")
            parts.append(f"{name}={REDACTED}" if eq and self.is_sensitive(_unquote(name)) else part)
        return "&".join(parts)

    def _pairs(self, text: str) -> str:
        out: list[str] = []
        pos = 0
        while (match := _PAIR.search(text, pos)) is not None:
            value = match.group("value")
            if (
                self.is_sensitive(match.group("name"))
                and value != REDACTED
                and not _opens_sentence(text, match)
            ):
                out += (text[pos : match.start("value")], REDACTED)
                pos = match.end("value")
            else:
                # The value may itself hold a pair (``error:token=...``): look at it again.
                out.append(text[pos : match.end("sep")])
                pos = match.end("sep")
        out.append(text[pos:])
        return "".join(out)

    def _tuple_match(self, match: re.Match[str]) -> str:
        if not self.is_sensitive(match.group("name")):
            return match.group(0)
        start, end = match.span("value")
        offset = match.start()
        whole = match.group(0)
        return whole[: start - offset] + REDACTED + whole[end - offset :]

    # --- structures -----------------------------------------------------------------------

    def headers(self, headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
        """Copy headers into a plain dict with sensitive values replaced by ``***``.

        The names keep their casing; the input (a dict, an ``httpx.Headers`` or
        ``(name, value)`` pairs) is never modified.
        """
        pairs = headers.items() if isinstance(headers, Mapping) else headers
        return {name: REDACTED if self.is_sensitive(name) else value for name, value in pairs}

    def mapping(self, value: Mapping[Any, Any], depth: int = 1) -> Mapping[Any, Any]:
        """A mapping with sensitive keys masked and strings cleaned, a few levels deep.

        An untouched mapping is returned as it is, so formatters see the caller's object.
        """
        changed = False
        out: dict[Any, Any] = {}
        for key, item in value.items():
            new = REDACTED if self.is_sensitive(key) else self.value(item, depth)
            changed = changed or new is not item
            out[key] = new
        return out if changed else value

    def value(self, item: Any, depth: int = 1) -> Any:
        """One value of a structure: strings cleaned, mappings and lists followed."""
        if isinstance(item, str):
            cleaned = self.text(item)
            return item if cleaned == item else cleaned
        if depth >= _MAX_DEPTH:
            return item
        if isinstance(item, Mapping):
            return self.mapping(item, depth + 1)
        if isinstance(item, list | tuple):
            new = [self.value(element, depth + 1) for element in item]
            if any(a is not b for a, b in zip(new, item, strict=True)):
                return type(item)(new) if isinstance(item, tuple) else new
        return item

    def error(self, error: SerializedError) -> SerializedError:
        """A serialised error with its message, stack, history and causes cleaned."""
        cleaned = self.value(dict(error))
        return cleaned  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        extra = sorted(self._names - SENSITIVE_NAMES)
        return f"Redaction(names={extra!r}, allow={sorted(self._allow)!r})"


def _opens_sentence(text: str, match: re.Match[str]) -> bool:
    """The value of a ``name: value`` pair is the first word of a sentence about the name.

    Only an unquoted value after a colon and a space qualifies, one of the words our
    messages open with (``_SENTENCE_OPENERS``) and followed by another word: ``token: use
    at least 12 characters``. Any other word, a quoted value, one after ``=`` or right
    after the colon, or one that ends the line is a value, and masked.
    """
    sep = match.group("sep")
    if match.group("q1") or match.group("q2") or "=" in sep or not sep.endswith((" ", "\t")):
        return False
    if match.group("value") not in _SENTENCE_OPENERS:
        return False
    return _MORE_WORDS.match(text, match.end("value")) is not None


DEFAULT_REDACTION: Final = Redaction()
"""The policy used when none is given: the default names, no extra values."""


def redact_text(text: str, redaction: Redaction | None = None) -> str:
    """``text`` with every secret masked by ``redaction`` (default: the default policy)."""
    return (redaction or DEFAULT_REDACTION).text(text)


def redact_url(url: str, redaction: Redaction | None = None) -> str:
    """``url`` with user info and sensitive query parameters masked (see :class:`Redaction`)."""
    return (redaction or DEFAULT_REDACTION).url(url)


# --- stacks ---------------------------------------------------------------------------------


def relative_source_path(filename: str) -> str:
    """A source file named relative to the import path it was loaded from.

    ``/srv/app/.venv/lib/python3.12/site-packages/watukuy/runtime/lane.py`` becomes
    ``watukuy/runtime/lane.py`` and ``/srv/app/jobs/orders.py`` (with ``/srv/app`` on
    ``sys.path``) becomes ``jobs/orders.py``; a file outside every import path keeps only
    its base name. Stored stacks never reveal the host's directory layout.
    """
    if not filename or filename.startswith("<"):
        return filename
    normalised = filename.replace("\\", "/")
    best = ""
    for entry in sys.path:
        root = entry.replace("\\", "/").rstrip("/")
        if root and normalised.startswith(root + "/") and len(root) > len(best):
            best = root
    if best:
        return normalised[len(best) + 1 :]
    return normalised.rsplit("/", 1)[-1]


def format_stack(error: BaseException, redaction: Redaction | None = None) -> str:
    """The traceback of ``error`` (without its chain), paths relative, secrets masked."""
    summary = traceback.TracebackException(type(error), error, error.__traceback__, compact=True)
    for frame in summary.stack:
        frame.filename = relative_source_path(frame.filename)
    return (redaction or DEFAULT_REDACTION).text("".join(summary.format(chain=False)))


# --- logging --------------------------------------------------------------------------------


class RedactingLogger(logging.LoggerAdapter[Any]):
    """A logger adapter that cleans every record before it exists.

    The message is formatted eagerly and cleaned, ``extra`` mappings are cleaned, and an
    ``exc_info`` traceback is written, cleaned and with relative paths, after the message
    (so a handler never formats the raw exception itself). Records below the logger's level
    cost nothing.

    Args:
        logger: The logger to write to: a ``logging.Logger``, or a ``LoggerAdapter`` whose
            own ``process`` then sees the cleaned message.
        redaction: The policy.
        extra: Fields added to every record (the caller's ``extra`` wins on a clash).
        prefix: Text put before every message (``"[orders/acme] "``), so a line names what
            it is about even where a handler prints the message alone.
    """

    def __init__(
        self,
        logger: logging.Logger | logging.LoggerAdapter[Any],
        redaction: Redaction | None = None,
        extra: Mapping[str, object] | None = None,
        prefix: str = "",
    ) -> None:
        super().__init__(logger, dict(extra or {}))
        self.redaction = redaction or DEFAULT_REDACTION
        self.prefix = prefix

    def bind(self, **extra: object) -> RedactingLogger:
        """A logger with the same policy and prefix, and more fields."""
        return RedactingLogger(
            self.logger, self.redaction, {**(self.extra or {}), **extra}, self.prefix
        )

    def child(self, name: str, **extra: object) -> RedactingLogger:
        """A logger whose messages also start with ``[name]``, with more fields.

        Args:
            name: What the lines are about (a poller, a key, a component).
            extra: Fields added to every record.
        """
        return RedactingLogger(
            self.logger, self.redaction, {**(self.extra or {}), **extra}, f"{self.prefix}[{name}] "
        )

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        """Merge the adapter's fields with the caller's ``extra``."""
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        """Log ``msg % args`` at ``level``, cleaned of secrets."""
        if not self.isEnabledFor(level):
            return
        msg, kwargs = self.process(msg, kwargs)
        redaction = self.redaction
        text = str(msg)
        if args:
            try:
                text = text % (args[0] if len(args) == 1 and isinstance(args[0], Mapping) else args)
            except (TypeError, ValueError, KeyError):
                text = " ".join([text, *map(str, args)])
        exc_info = kwargs.pop("exc_info", None)
        error = _exception_of(exc_info)
        if error is not None:
            text = f"{text}\n{format_stack(error, redaction).rstrip()}"
        kwargs["extra"] = redaction.mapping(kwargs["extra"])
        kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1
        self.logger.log(level, redaction.text(self.prefix + text), **kwargs)


def _exception_of(exc_info: object) -> BaseException | None:
    if isinstance(exc_info, BaseException):
        return exc_info
    if (
        isinstance(exc_info, tuple)
        and len(exc_info) == 3
        and isinstance(exc_info[1], BaseException)
    ):
        return exc_info[1]
    if exc_info is True:
        return sys.exc_info()[1]
    return None


_MAX_CAUSE_DEPTH: Final = 4


def describe_error(error: SerializedError) -> str:
    """One line for a log: a serialised error's type and message (``ReadTimeout on GET
    https://api.test/items``, ``RuntimeError: boom``), the type said once."""
    name = error.get("name", "")
    message = error.get("message", "")
    if not name or message.startswith(name):
        return message or name
    return f"{name}: {message}" if message else name


def serialize_error(
    error: BaseException, *, redaction: Redaction = DEFAULT_REDACTION, _depth: int = 0
) -> SerializedError:
    """Reduce any exception to JSON-safe fields: name, message, code, stack, status, cause.

    The message is the exception's text, or its type name when it has none.

    The message and the stack are cleaned by ``redaction`` (URL credentials, sensitive
    parameters and headers, see :class:`~watukuy.model.redact.Redaction`), and the stack
    names source files relative to their import path, never by absolute path.
    """
    name = type(error).__name__
    # An exception without text (``TimeoutError()``, ``httpx.ReadTimeout("")``) is still
    # told by its type: every surface that shows only the message says something.
    out: SerializedError = {"name": name, "message": redaction.text(str(error)) or name}
    code = getattr(error, "code", None)
    if isinstance(code, str):
        out["code"] = code
    status = getattr(error, "status", None)
    if isinstance(status, int) and not isinstance(status, bool):
        out["status"] = status
    if error.__traceback__ is not None:
        out["stack"] = format_stack(error, redaction)
    issues = getattr(error, "issues", None)
    if isinstance(error, ValidationError) and issues:
        out["issues"] = [redaction.value(dict(issue)) for issue in issues]
    cause = error.__cause__
    if cause is not None and _depth < _MAX_CAUSE_DEPTH:
        out["cause"] = serialize_error(cause, redaction=redaction, _depth=_depth + 1)
    return out

"""Which ``Host`` the page answers to, and which origins may change anything.

Two attacks on a page that a browser can reach:

- **DNS rebinding.** A page on ``evil.example`` re-points its own name at 127.0.0.1 once
  it has loaded; the browser then sends its requests to the admin page with
  ``Host: evil.example:8765``, and treats the answers as the attacker's own origin, so it
  can read them (the CSRF token included) and post forms. The only thing that tells such a
  request apart is its ``Host``: :class:`HostRule` lets through only the names the page is
  served under.
- **Cross-origin requests.** A page on another origin posts a form to the admin page. The
  browser sends ``Origin`` (on every ``POST``) and ``Sec-Fetch-Site``; :func:`cross_origin`
  refuses a change whose origin is not the page's own (or one the operator allowed).

Everything here is a pure function of header values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["LOOPBACK_NAMES", "HostRule", "cross_origin", "normal_origins", "split_host"]

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
"""The names of this machine a browser uses."""

_DEFAULT_PORTS = {"http": 80, "https": 443}


def split_host(value: str) -> tuple[str, int | None] | None:
    """A ``Host`` header (or an authority) as ``(name, port)``, lower-cased; IPv6 names keep
    their brackets. ``None`` when it is not a valid host."""
    value = value.strip().lower()
    if not value or any(char in value for char in "/\\@ \t?#*"):
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[: end + 1], value[end + 1 :]
        if not rest:
            return name, None
        if not rest.startswith(":"):
            return None
        port_text = rest[1:]
    else:
        name, colon, port_text = value.partition(":")
        if not colon:
            return (name, None) if name else None
        if not name or ":" in port_text:
            return None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return None
    return name, int(port_text)


@dataclass(frozen=True, slots=True)
class HostRule:
    """The ``Host`` names a page answers to.

    Each pattern is a name (any port), ``name:port``, ``*.example.com`` (any subdomain, any
    port) or ``*`` (anything). IPv6 addresses are written in brackets: ``[::1]``.

    Args:
        patterns: The allowed names.
    """

    patterns: tuple[str, ...]

    @classmethod
    def of(cls, patterns: Iterable[str]) -> HostRule:
        """The rule for ``patterns`` (strings, stripped and lower-cased).

        Raises:
            ValueError: A pattern is not a host name, ``name:port``, ``*.domain`` or ``*``.
        """
        cleaned: list[str] = []
        for pattern in patterns:
            text = pattern.strip().lower() if isinstance(pattern, str) else ""
            wildcard = text == "*" or (text.startswith("*.") and split_host(text[2:]))
            if not wildcard and split_host(text) is None:
                raise ValueError(f"expected a host name, name:port or *.domain, got {pattern!r}")
            cleaned.append(text)
        return cls(tuple(cleaned))

    def allows(self, host: str | None) -> bool:
        """Whether a request with this ``Host`` header may be answered."""
        if "*" in self.patterns:
            return True
        parsed = None if host is None else split_host(host)
        if parsed is None:
            return False
        name, port = parsed
        for pattern in self.patterns:
            if pattern.startswith("*."):
                if name.endswith(pattern[1:]):
                    return True
                continue
            wanted = split_host(pattern)
            if wanted is None:
                continue
            if wanted[0] == name and wanted[1] in (None, port):
                return True
        return False


def _origin_authority(origin: str) -> tuple[str, str, int] | None:
    """``(scheme, name, port)`` of an ``Origin`` or ``Referer`` value."""
    try:
        parts = urlsplit(origin.strip())
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.netloc:
        return None
    parsed = split_host(parts.netloc)
    if parsed is None:
        return None
    name, port = parsed
    return scheme, name, port if port is not None else _DEFAULT_PORTS[scheme]


def _normal(origin: str) -> str | None:
    authority = _origin_authority(origin)
    if authority is None:
        return None
    scheme, name, port = authority
    shown = "" if _DEFAULT_PORTS[scheme] == port else f":{port}"
    return f"{scheme}://{name}{shown}"


def normal_origins(origins: Iterable[str]) -> frozenset[str]:
    """Allowed origins, written the way :func:`cross_origin` compares them.

    Raises:
        ValueError: One is not ``http(s)://name[:port]``.
    """
    out: set[str] = set()
    for origin in origins:
        normal = _normal(origin) if isinstance(origin, str) else None
        if normal is None:
            raise ValueError(f"expected an origin like https://admin.example.com, got {origin!r}")
        out.add(normal)
    return frozenset(out)


def _same_site_as_host(origin: str, host: str | None) -> bool:
    authority = _origin_authority(origin)
    parsed = None if host is None else split_host(host)
    if authority is None or parsed is None:
        return False
    scheme, name, port = authority
    if name != parsed[0]:
        return False
    if parsed[1] is not None:
        return port == parsed[1]
    # No port in Host: the default one of whatever scheme the browser used (a proxy may
    # have ended TLS, so the scheme the server sees proves nothing).
    return port == _DEFAULT_PORTS[scheme]


def cross_origin(headers: Mapping[str, str], allowed: frozenset[str] = frozenset()) -> str | None:
    """Why a state-changing request must be refused as cross-origin, or ``None``.

    The rule, in order:

    1. With an ``Origin`` header (every browser sends one on ``POST``): it must be the
       page's own origin (the same host and port as ``Host``) or one of ``allowed``;
       ``Origin: null`` (a sandboxed frame, a ``data:`` page) never is.
    2. With ``Sec-Fetch-Site``: it must say ``same-origin`` (unless the origin was
       allowed above).
    3. Without ``Origin``, a ``Referer`` must be of the page's own origin too.
    4. With none of them the request is not a browser's (a script, ``curl``): it is let
       through to the CSRF check, which still needs the session cookie and its token.

    Args:
        headers: The request headers (lower-case names).
        allowed: Other origins allowed to post, as :func:`normal_origins` writes them.

    Returns:
        A one-line reason, or ``None`` to let the request through.
    """
    host = headers.get("host")
    origin = headers.get("origin")
    site = headers.get("sec-fetch-site")
    if origin is not None:
        if _normal(origin) in allowed:
            return None
        if not _same_site_as_host(origin, host):
            return f"cross-origin request: Origin {origin[:200]!r} is not this page's origin"
    if site is not None and site.strip().lower() != "same-origin":
        return f"cross-origin request: Sec-Fetch-Site is {site[:40]!r}, not 'same-origin'"
    referer = headers.get("referer")
    if origin is None and referer is not None and not _same_site_as_host(referer, host):
        return "cross-origin request: the Referer is not this page's origin"
    return None

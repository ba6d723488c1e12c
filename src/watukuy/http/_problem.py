"""RFC 9457 Problem Details: the JSON error bodies many APIs send with a 4xx or 5xx."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

from watukuy.model import json as wkjson

__all__ = ["parse_problem_details", "problem_summary"]

_PROBLEM_TYPE: Final = "application/problem+json"
_STANDARD: Final = ("type", "title", "status", "detail")
_TEXT_MEMBERS: Final = frozenset({"type", "title", "detail", "instance"})
_STATUS_TEXT: Final = re.compile(r"[0-9]{3}", re.ASCII)


def _media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def _status(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _STATUS_TEXT.fullmatch(value):
        return int(value)
    return None


def parse_problem_details(
    content_type: str | None, body: str | bytes | None
) -> dict[str, Any] | None:
    """Read an RFC 9457 Problem Details object from an error response.

    The body is read when the media type is ``application/problem+json``, or when it is any
    JSON type (``application/json``, ``*+json``) and the object has at least one of
    ``type``, ``title``, ``status`` or ``detail``. The standard members are kept only when
    well-typed (``status`` may also be a three-digit string); extension members are kept
    as they are.

    Args:
        content_type: The raw ``Content-Type`` header, or ``None``.
        body: The response body.

    Returns:
        The problem as a dict, or ``None`` when the body is not a problem document.
    """
    if body is None:
        return None
    media_type = _media_type(content_type)
    is_problem = media_type == _PROBLEM_TYPE
    if not (is_problem or media_type == "application/json" or media_type.endswith("+json")):
        return None
    if not (body.strip() if isinstance(body, str) else body.strip(b" \t\r\n")):
        return None
    try:
        parsed = wkjson.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(parsed, dict):
        return None
    if not is_problem and not any(key in parsed for key in _STANDARD):
        return None
    problem: dict[str, Any] = {}
    for key, value in parsed.items():
        if key == "status":
            status = _status(value)
            if status is not None:
                problem["status"] = status
        elif key in _TEXT_MEMBERS:
            if isinstance(value, str):
                problem[key] = value
        else:
            problem[key] = value
    return problem


def problem_summary(problem: Mapping[str, Any] | None) -> str | None:
    """The line an error message quotes from a problem: its ``title``, else its ``detail``."""
    if not problem:
        return None
    for key in ("title", "detail"):
        value = problem.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None

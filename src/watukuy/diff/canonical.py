"""Canonical JSON (RFC 8785, "JCS") and the content hash built on it.

The canonical form of a value is the JCS text of ``to_jsonable(value)``, written exactly as
the original watukuy writes it, so a hash computed here equals the hash computed there:

- object keys sorted by UTF-16 code units, no whitespace;
- numbers written the way JavaScript's ``Number.prototype.toString`` writes doubles
  (shortest round-trip digits; plain notation for ``1e-6 <= |x| < 1e21``, exponent form
  with an explicit sign otherwise; ``100.0`` is ``100`` and ``-0.0`` is ``0``);
- integers beyond 2**53 written as the double JavaScript would have parsed them into;
- strings escaped only where JCS requires it, everything else literal UTF-8.

It is on the hot path (every item of every page is hashed), so three writers share the
work, each used only when it can prove its bytes right:

1. **orjson as is.** orjson writes plain JSON data almost exactly as JCS does; three
   C-speed scans of its output prove that nothing it writes differently is present
   (extreme floats, a rare key-order case) and that every ``null`` in it comes from a
   None, not from a NaN or an Infinity, which orjson writes as null too. Integral floats
   (``4.0``, which JCS writes ``4``) are fixed in the text and the fix checked by parsing
   it back (:func:`_integral_floats_fixed`).
2. **orjson after a walk.** Otherwise the value is walked once in Python: typed values go
   through ``to_jsonable``, and the numbers orjson would write differently are replaced
   by :class:`orjson.Fragment` holding JavaScript's text. The output is checked again.
3. **The reference writer** (:func:`~watukuy.diff.jcs.reference_json`) for whatever is
   left, and to report errors precisely.
"""

from __future__ import annotations

import hashlib
import math
import re
from itertools import compress, repeat
from operator import countOf, is_
from typing import Any, Final

import orjson

from watukuy.model.json import to_jsonable

from .jcs import format_number, reference_json, utf16_sorted

__all__ = ["canonical_json", "content_hash"]

_sha256: Final = hashlib.sha256
_isfinite: Final = math.isfinite
_dumps: Final = orjson.dumps
_loads: Final = orjson.loads
_Fragment: Final = orjson.Fragment
_MAX_SAFE_INT: Final = 2**53 - 1

_OPTIONS: Final = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_STRICT_INTEGER  # JavaScript rounds beyond 2**53; _prepare writes those
    # With these and no default=, orjson raises for anything but exact built-in types,
    # enums and UUIDs (which it writes as to_jsonable does), sending the value to
    # _prepare: datetimes keep to_jsonable's form. (An orjson.Fragment inside an item
    # would be copied verbatim; it is not JSON data and has no place in items.)
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)

_OPTIONS_UNSORTED: Final = _OPTIONS & ~orjson.OPT_SORT_KEYS

# Where orjson and JavaScript write a double differently, orjson's token holds one of:
# ".0" before a delimiter (integral values such as 100.0 and -0.0) or followed by five
# more zeros (plain notation below 1e-6); a positive exponent up to 20 (JavaScript goes
# plain below 1e21); a negative exponent down to 6 (JavaScript goes plain from 1e-6 on).
# Beyond those ranges both write the same exponent form. A match inside a string only
# costs a slower path, never correctness.
_integral_or_tiny_pattern: Final = re.compile(rb"\.0(?:[,\]}]|0{5})")
_integral_or_tiny: Final = _integral_or_tiny_pattern.search
_integral_or_tiny_all: Final = _integral_or_tiny_pattern.finditer
_plain_in_js_big: Final = re.compile(rb"e\+(?:1?\d|20)[,\]}]").search
_plain_in_js_small: Final = re.compile(rb"e-[1-6][,\]}]").search
# The byte that makes quotes ambiguous.
_BACKSLASH: Final = b"\\"
# UTF-8 lead bytes of the characters above U+FFFF.
_supplementary: Final = re.compile(rb"[\xf0-\xf4]").search
_NULL: Final = b"null"
# Single bytes are tested with `in`, which is a memchr: next to free, unlike any scan.
_PLUS: Final = ord("+")
_MINUS: Final = ord("-")
_ZERO: Final = ord("0")
_LEAD_EE: Final = 0xEE
_LEAD_EF: Final = 0xEF

_MISSING: Final = object()
_NONES: Final = repeat(None)  # endless and stateless, so one instance serves every call
_none_keys: tuple[str, ...] = ("",)
"""Top-level keys that held None in the last dict whose nulls needed counting.

Items of one feed tend to leave the same fields empty, so the fast path tries these keys
(a lookup each) before it counts None members (a pass over all of them). It is only a
guess, checked by identity every time: a stale one costs that pass, never correctness.
Never empty, so the fast path can read its first key without asking.
"""


def _is_plain_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float)


def _numbers_agree(out: bytes) -> bool:
    """No number token in ``out`` is one orjson writes differently from JavaScript."""
    return (
        _integral_or_tiny(out) is None
        and _plain_in_js_small(out) is None
        and (_PLUS not in out or _plain_in_js_big(out) is None)
    )


def _keys_in_order(out: bytes) -> bool:
    """orjson's code-point key order is also UTF-16 order for the strings in ``out``.

    The two orders differ only between a character in U+E000..U+FFFF (UTF-8 lead byte EE
    or EF) and one above U+FFFF; unless both kinds occur, they agree.
    """
    return (_LEAD_EE not in out and _LEAD_EF not in out) or _supplementary(out) is None


def _integral_floats_fixed(value: Any, out: bytes) -> bytes | None:
    """orjson's text for ``value`` with its integral floats written as JavaScript writes
    them (``100.0`` as ``100``), or ``None`` when that cannot be proved right.

    Feeds often carry whole amounts as floats (a price of ``4.0``), which orjson writes
    with ``.0``. Dropping every ``.0`` before a delimiter is right unless one of them sat
    inside a string. Without a backslash in orjson's text (which escapes every quote inside
    a string), each ``"`` opens or closes a string, so a ``.0`` lies inside one exactly when
    an odd number of quotes precede it; the quotes are counted once, between matches.
    With a backslash, the result is parsed back and compared with ``value`` (``100 ==
    100.0``, but a changed string or key differs). ``-0.0`` (JavaScript writes ``0``) and
    plain-notation tiny numbers (``.0`` and five more zeros) are left to the walk.
    """
    quotes_decide = _BACKSLASH not in out
    count = out.count
    pieces: list[bytes] = []
    start = quotes = 0
    for match in _integral_or_tiny_all(out):
        at = match.start()
        if out[at + 2] == _ZERO:
            return None  # plain notation below 1e-6
        if out[at - 1] == _ZERO and out[at - 2] == _MINUS:
            return None  # -0.0 (a number token starts after "[", ":" or ",", so at >= 2)
        if quotes_decide:
            quotes += count(b'"', start, at)
            if quotes & 1:
                return None  # a ".0," inside a string: the walk writes this value
        pieces.append(out[start:at])
        start = at + 2
    pieces.append(out[start:])
    fixed = b"".join(pieces)
    if quotes_decide:
        return fixed
    try:
        same = _loads(fixed) == value
    except orjson.JSONDecodeError:  # pragma: no cover - the text is orjson's own, edited
        return None
    return fixed if same else None


def _only_finite_floats(value: Any) -> bool:
    """True when ``value`` holds only exact built-in JSON types and finite floats."""
    stack = [value]
    while stack:
        node = stack.pop()
        for item in node.values() if type(node) is dict else node:
            kind = type(item)
            if kind is str or item is None or kind is int or kind is bool:
                continue  # the usual leaves, tested first: this walk is per item
            if kind is float:
                if not _isfinite(item):
                    return False
            elif kind is dict or kind is list or kind is tuple:
                stack.append(item)
            else:
                return False
    return True


def _nulls_accounted_for(value: dict[str, Any] | list[Any], nulls: int) -> bool:
    """Whether ``nulls`` "null"s in orjson's text for ``value`` all come from None.

    orjson writes NaN and Infinity as null, so a "null" nothing accounts for may be one.
    Each member of the top-level container that is None is a distinct "null"; when there
    are as many such members as "null"s, nothing else became null. The keys remembered
    from the last item are tried first, then all members are counted (and the keys that
    hold None remembered). Members are tested by identity: an object whose ``__eq__``
    claims to equal None is written as something else and must not count. Failing that,
    the value is walked.
    """
    global _none_keys
    if type(value) is dict:
        keys = _none_keys
        if len(keys) == nulls:
            for key in keys:
                if value.get(key, _MISSING) is not None:
                    break
            else:
                return True
        keys = tuple(compress(value, map(is_, value.values(), _NONES)))
        if len(keys) == nulls:
            _none_keys = keys
            return True
    elif countOf(map(is_, value, _NONES), True) == nulls:
        return True
    # More "null"s than None members: nested Nones, "null" inside a string, or a NaN.
    return _only_finite_floats(value)


def _fast(value: dict[str, Any] | list[Any]) -> bytes | None:
    """orjson's text for ``value`` when it is provably the JCS text, else ``None``.

    :func:`_numbers_agree` and :func:`_keys_in_order` are written out here, and a lone
    "null" is matched with the likely None member in place: this runs for every item,
    where each Python call saved shows.

    Raises:
        TypeError: orjson refused the value (typed values, non-string keys, integers
            beyond 2**53, lone surrogates, deep nesting).
    """
    text = _dumps(value, option=_OPTIONS)
    out = text if _integral_or_tiny(text) is None else _integral_floats_fixed(value, text)
    if (
        out is not None
        and _plain_in_js_small(out) is None
        and (_PLUS not in out or _plain_in_js_big(out) is None)
        and ((_LEAD_EE not in out and _LEAD_EF not in out) or _supplementary(out) is None)
    ):
        nulls = out.count(_NULL)
        if (
            not nulls
            or (nulls == 1 and type(value) is dict and value.get(_none_keys[0], _MISSING) is None)
            or _nulls_accounted_for(value, nulls)
        ):
            return out
    return None


def _orjson_writes_as_assumed() -> bool:
    """Check, once, the orjson habits the fast paths rely on.

    Should a future orjson write numbers, escapes or key order differently, the fast paths
    switch themselves off and every value takes the reference writer: slower, never wrong.
    """
    numbers = [1e21, 1e20, 1.5e300, 1e-6, 2.5e-8, 1e-5, 100.0, -0.0, 0.1, 123.45, 5e-324]
    numbers += [math.nan, math.inf, -math.inf]  # must become null: see _nulls_accounted_for
    text = '\x00\x08\t\n\x0c\r\x1f\x7f\u2028/"\\\u00e9\U0001f600'
    try:
        out = orjson.dumps([numbers, text, {"b": 1, "a": 2}, _Fragment(b"1e+21")], option=_OPTIONS)
    except TypeError:
        return False
    expected = (
        b"[[1e+21,1e+20,1.5e+300,1e-6,2.5e-8,0.00001,100.0,-0.0,0.1,123.45,5e-324,"
        b"null,null,null]," + reference_json(text) + b',{"a":2,"b":1},1e+21]'
    )
    return out == expected


FAST_PATHS: Final = _orjson_writes_as_assumed()
"""Whether orjson behaves as the fast paths assume (checked once, at import)."""


def _number(value: float) -> float | int | orjson.Fragment:
    if value.is_integer():
        if -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT:
            return int(value)  # what JavaScript writes for it; -0.0 becomes 0
    elif 1e-5 <= abs(value) < 1e16:
        return value  # orjson already writes these as JavaScript does
    return _Fragment(format_number(value))  # raises ValueError for NaN and Infinity


def _prepare(node: Any) -> Any:
    """Exact built-in JSON data orjson writes as JCS (up to key order): a copy of ``node``
    with typed values made plain and odd numbers pre-written as fragments.

    Raises:
        ValueError: NaN or Infinity, or an integer too large for a double.
        TypeError: A value with no JSON form (from ``to_jsonable``).
    """
    kind = type(node)
    if kind is str or kind is bool or node is None:
        return node
    if kind is int:
        return node if -_MAX_SAFE_INT <= node <= _MAX_SAFE_INT else _Fragment(format_number(node))
    if kind is float:
        return _number(node)
    if kind is dict:
        copy = {}
        for key, item in node.items():
            if type(key) is not str:
                return _prepare(to_jsonable(node))  # to_jsonable knows which keys are allowed
            # Strings, booleans and None pass unchanged; skipping the call saves time.
            inner = type(item)
            copy[key] = item if inner is str or inner is bool or item is None else _prepare(item)
        return copy
    if kind is list or kind is tuple:
        return [_prepare(item) for item in node]
    if isinstance(node, str):
        return str.__str__(node)  # the text of a str subclass (a StrEnum, say)
    if isinstance(node, int):
        return _prepare(int.__index__(node))
    if isinstance(node, float):
        return _number(float.__float__(node))
    return _prepare(to_jsonable(node))


def _in_utf16_order(node: Any) -> Any:
    """A copy of prepared data whose objects list their keys in UTF-16 order."""
    if type(node) is dict:
        return {key: _in_utf16_order(node[key]) for key in utf16_sorted(node)}
    if type(node) is list:
        return [_in_utf16_order(item) for item in node]
    return node


def _slow(value: Any) -> bytes:
    if FAST_PATHS:
        try:
            prepared = _prepare(value)
            out = orjson.dumps(prepared, option=_OPTIONS)
            if _numbers_agree(out):
                if _keys_in_order(out):
                    return out
                # Rare: let the objects carry UTF-16 order and orjson keep it.
                return orjson.dumps(_in_utf16_order(prepared), option=_OPTIONS_UNSORTED)
        except (TypeError, ValueError, RecursionError):
            pass  # the reference writer raises the precise error, or finds none
    return reference_json(value)


def canonical_json(value: Any) -> bytes:
    """The RFC 8785 canonical JSON of ``value``, byte for byte what the original writes.

    Args:
        value: Plain JSON data (dict, list, tuple, str, int, float, bool, None) or typed
            values that :func:`watukuy.model.json.to_jsonable` understands (pydantic models,
            msgspec structs, dataclasses, datetimes, enums, UUIDs, decimals).

    Returns:
        The canonical text as UTF-8 bytes.

    Raises:
        ValueError: NaN or Infinity in plain data, a lone surrogate in a string, an
            integer too large for a double, or a value that contains itself.
        TypeError: A value with no JSON form, including a non-finite float inside a typed
            value (reported by :func:`~watukuy.model.json.to_jsonable`).
    """
    kind = type(value)
    if FAST_PATHS and kind is not dict and kind is not list and not _is_plain_scalar(value):
        # A typed value (a model, a struct...): to_jsonable makes it plain data, which
        # orjson can then usually write as is.
        try:
            value = to_jsonable(value)
        except TypeError:
            return reference_json(value)  # raises the precise error
        kind = type(value)
    if FAST_PATHS and (kind is dict or kind is list):
        try:
            out = _fast(value)
        except TypeError:
            out = None
        if out is not None:
            return out
    return _slow(value)


def content_hash(value: Any) -> str:
    """SHA-256 (hex) of :func:`canonical_json` of ``value``: the fingerprint of an item.

    Vectors shared with the original: ``{"a": 1}`` hashes to ``015abd7f…f862`` and
    ``None`` to ``74234e98…b90b``.

    Raises:
        ValueError: See :func:`canonical_json`.
        TypeError: See :func:`canonical_json`.
    """
    kind = type(value)
    if FAST_PATHS and (kind is dict or kind is list):
        # _fast written out once more: this is the package's hottest call, and the frame
        # it saves is worth the repetition. Keep the two in step (the differential test
        # test_content_hash_is_the_hash_of_canonical_json holds them to the same results).
        try:
            text = _dumps(value, option=_OPTIONS)
        except TypeError:
            return _sha256(_slow(value)).hexdigest()
        out = text if _integral_or_tiny(text) is None else _integral_floats_fixed(value, text)
        if (
            out is not None
            and _plain_in_js_small(out) is None
            and (_PLUS not in out or _plain_in_js_big(out) is None)
            and ((_LEAD_EE not in out and _LEAD_EF not in out) or _supplementary(out) is None)
        ):
            nulls = out.count(_NULL)
            if (
                not nulls
                or (nulls == 1 and kind is dict and value.get(_none_keys[0], _MISSING) is None)
                or _nulls_accounted_for(value, nulls)
            ):
                return _sha256(out).hexdigest()
        return _sha256(_slow(value)).hexdigest()
    return _sha256(canonical_json(value)).hexdigest()

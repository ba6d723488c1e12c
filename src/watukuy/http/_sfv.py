"""A small parser for HTTP Structured Field Values (RFC 9651): Lists and Dictionaries.

Only parsing, and only what response headers such as ``RateLimit`` and
``RateLimit-Policy`` need: every bare item type of RFC 9651 (integers, decimals, strings,
tokens, byte sequences, booleans, dates and display strings), parameters and inner lists.
The algorithms follow section 4.2 of the RFC step by step; anything the RFC says "fail
parsing" for raises :class:`SfvError`, which callers turn into "no usable header".
"""

from __future__ import annotations

import base64
import binascii
import string
from dataclasses import dataclass, field
from typing import Final, TypeAlias

__all__ = [
    "BareItem",
    "Item",
    "Member",
    "SfvError",
    "Token",
    "parse_dictionary",
    "parse_list",
]


class SfvError(ValueError):
    """The text is not a valid structured field of the requested type."""


class Token(str):
    """A token bare item (``default``, ``foo/bar``), told apart from a string."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class DisplayString:
    """A display string bare item (``%"..."``), decoded."""

    text: str


BareItem: TypeAlias = int | float | str | Token | bytes | bool | DisplayString
"""``int``, ``float`` (decimal), ``str`` (string), :class:`Token`, ``bytes`` (byte
sequence), ``bool``, :class:`DisplayString`; a date is an ``int`` of epoch seconds."""


@dataclass(frozen=True, slots=True)
class Item:
    """A bare item with its parameters."""

    value: BareItem
    params: dict[str, BareItem] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class InnerList:
    """A parenthesised list of items, with its own parameters."""

    items: tuple[Item, ...]
    params: dict[str, BareItem] = field(default_factory=dict)


Member: TypeAlias = Item | InnerList

_LCALPHA: Final = frozenset(string.ascii_lowercase)
_KEY_FIRST: Final = _LCALPHA | {"*"}
_KEY_REST: Final = _LCALPHA | frozenset(string.digits) | frozenset("_-.*")
_TCHAR: Final = frozenset(string.ascii_letters + string.digits + "!#$%&'*+-.^_`|~")
_TOKEN_REST: Final = _TCHAR | {":", "/"}
_BASE64: Final = frozenset(string.ascii_letters + string.digits + "+/=")
_DIGITS: Final = frozenset(string.digits)
_HEX_LOWER: Final = frozenset("0123456789abcdef")


class _Reader:
    """The input of one parse and the position in it."""

    __slots__ = ("pos", "text")

    def __init__(self, text: str) -> None:
        # Leading and trailing spaces are discarded before parsing (RFC 9651, 4.2).
        self.text = text.strip(" ")
        self.pos = 0

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def take(self) -> str:
        char = self.peek()
        self.pos += 1
        return char

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def skip(self, chars: str) -> None:
        while self.peek() and self.peek() in chars:
            self.pos += 1


def _check_ascii(text: str) -> None:
    if not text.isascii():
        raise SfvError("structured fields are ASCII")


def parse_list(text: str) -> list[Member]:
    """Parse a List (RFC 9651, 4.2.1).

    Raises:
        SfvError: The text is not a valid List.
    """
    _check_ascii(text)
    reader = _Reader(text)
    members: list[Member] = []
    while not reader.at_end():
        members.append(_item_or_inner_list(reader))
        _separator(reader)
    return members


def parse_dictionary(text: str) -> dict[str, Member]:
    """Parse a Dictionary (RFC 9651, 4.2.2); a later duplicate key replaces an earlier one.

    Raises:
        SfvError: The text is not a valid Dictionary.
    """
    _check_ascii(text)
    reader = _Reader(text)
    members: dict[str, Member] = {}
    while not reader.at_end():
        key = _key(reader)
        if reader.peek() == "=":
            reader.take()
            member = _item_or_inner_list(reader)
        else:
            member = Item(True, _parameters(reader))
        members.pop(key, None)
        members[key] = member
        _separator(reader)
    return members


def _separator(reader: _Reader) -> None:
    reader.skip(" \t")
    if reader.at_end():
        return
    if reader.take() != ",":
        raise SfvError("expected ',' between members")
    reader.skip(" \t")
    if reader.at_end():
        raise SfvError("a trailing ','")


def _item_or_inner_list(reader: _Reader) -> Member:
    if reader.peek() == "(":
        return _inner_list(reader)
    return Item(_bare_item(reader), _parameters(reader))


def _inner_list(reader: _Reader) -> InnerList:
    reader.take()  # "("
    items: list[Item] = []
    while not reader.at_end():
        reader.skip(" ")
        if reader.peek() == ")":
            reader.take()
            return InnerList(tuple(items), _parameters(reader))
        items.append(Item(_bare_item(reader), _parameters(reader)))
        if reader.peek() not in (" ", ")"):
            raise SfvError("expected ' ' or ')' in an inner list")
    raise SfvError("an unterminated inner list")


def _parameters(reader: _Reader) -> dict[str, BareItem]:
    params: dict[str, BareItem] = {}
    while reader.peek() == ";":
        reader.take()
        reader.skip(" ")
        key = _key(reader)
        value: BareItem = True
        if reader.peek() == "=":
            reader.take()
            value = _bare_item(reader)
        params.pop(key, None)
        params[key] = value
    return params


def _key(reader: _Reader) -> str:
    if reader.peek() not in _KEY_FIRST or not reader.peek():
        raise SfvError("a key starts with a lowercase letter or '*'")
    start = reader.pos
    while reader.peek() and reader.peek() in _KEY_REST:
        reader.pos += 1
    return reader.text[start : reader.pos]


def _bare_item(reader: _Reader) -> BareItem:
    char = reader.peek()
    if char == "-" or (char and char in _DIGITS):
        return _number(reader)
    if char == '"':
        return _string(reader)
    if char == "*" or (char and char in string.ascii_letters):
        return _token(reader)
    if char == ":":
        return _bytes(reader)
    if char == "?":
        return _boolean(reader)
    if char == "@":
        reader.take()
        value = _number(reader)
        if not isinstance(value, int):
            raise SfvError("a date is an integer")
        return value
    if char == "%":
        return _display_string(reader)
    raise SfvError(f"no bare item starts with {char!r}")


def _number(reader: _Reader) -> int | float:
    sign = 1
    if reader.peek() == "-":
        reader.take()
        sign = -1
    if not reader.peek() or reader.peek() not in _DIGITS:
        raise SfvError("a number needs a digit")
    start = reader.pos
    decimal = False
    while reader.peek():
        char = reader.peek()
        if char in _DIGITS:
            reader.pos += 1
        elif char == "." and not decimal:
            if reader.pos - start > 12:
                raise SfvError("a decimal has at most 12 integer digits")
            decimal = True
            reader.pos += 1
        else:
            break
        if reader.pos - start > (16 if decimal else 15):
            raise SfvError("a number is too long")
    text = reader.text[start : reader.pos]
    if not decimal:
        return sign * int(text)
    if text.endswith(".") or len(text) - text.index(".") - 1 > 3:
        raise SfvError("a decimal has one to three fractional digits")
    return sign * float(text)


def _string(reader: _Reader) -> str:
    reader.take()  # '"'
    out: list[str] = []
    while not reader.at_end():
        char = reader.take()
        if char == "\\":
            escaped = reader.take()
            if escaped not in ('"', "\\"):
                raise SfvError("only '\\\"' and '\\\\' are escapes in a string")
            out.append(escaped)
        elif char == '"':
            return "".join(out)
        elif not " " <= char <= "~":
            raise SfvError("a string holds visible ASCII and spaces only")
        else:
            out.append(char)
    raise SfvError("an unterminated string")


def _token(reader: _Reader) -> Token:
    start = reader.pos
    reader.pos += 1
    while reader.peek() and reader.peek() in _TOKEN_REST:
        reader.pos += 1
    return Token(reader.text[start : reader.pos])


def _bytes(reader: _Reader) -> bytes:
    reader.take()  # ":"
    start = reader.pos
    while reader.peek() and reader.peek() in _BASE64:
        reader.pos += 1
    if reader.take() != ":":
        raise SfvError("an unterminated byte sequence")
    try:
        return base64.b64decode(reader.text[start : reader.pos - 1], validate=False)
    except (binascii.Error, ValueError) as error:
        raise SfvError("a byte sequence is base64") from error


def _boolean(reader: _Reader) -> bool:
    reader.take()  # "?"
    char = reader.take()
    if char not in ("0", "1"):
        raise SfvError("a boolean is ?0 or ?1")
    return char == "1"


def _display_string(reader: _Reader) -> DisplayString:
    reader.take()  # "%"
    if reader.take() != '"':
        raise SfvError('a display string starts with %"')
    out = bytearray()
    while not reader.at_end():
        char = reader.take()
        if char == "%":
            digits = reader.take() + reader.take()
            if len(digits) != 2 or not set(digits) <= _HEX_LOWER:
                raise SfvError("a display string escape is two lowercase hex digits")
            out.append(int(digits, 16))
        elif char == '"':
            try:
                return DisplayString(out.decode("utf-8"))
            except UnicodeDecodeError as error:
                raise SfvError("a display string is UTF-8") from error
        elif not " " <= char <= "~":
            raise SfvError("a display string holds visible ASCII and spaces only")
        else:
            out += char.encode()
    raise SfvError("an unterminated display string")

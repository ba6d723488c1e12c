"""The ``[sinks.NAME]`` tables of a configuration file: where the events of its pollers go.

========  ================================================================  ================
type      what each event becomes                                           keys
========  ================================================================  ================
stdout    one line of JSON on standard output (the event as a CloudEvent)   (none)
jsonl     one line of JSON appended to a file (the event as a CloudEvent)   ``path``
webhook   a signed POST (:func:`watukuy.sinks.webhook_sink`)                ``url``, ``secret``,
                                                                            ``headers``,
                                                                            ``format``,
                                                                            ``timeout``,
                                                                            ``follow_redirects``
handler   a call of your own handler                                        ``handler``
========  ================================================================  ================

Every sink also takes ``pollers = [...]`` (default: every poller of the file). A sink is
a consumer of each poller it takes, under the sink's name, so each sink keeps its own
progress, retries and parked events.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from watukuy.model import json as wkjson
from watukuy.model.errors import ConfigError
from watukuy.model.events import Event
from watukuy.runtime.consumers import check_consumer_name
from watukuy.runtime.context import HandlerContext

from ._toml_tables import Path, Source, Table

__all__ = ["SINK_TYPES", "ConfigSink", "JsonlSink", "StdoutSink", "read_sink"]

SINK_TYPES = ("stdout", "jsonl", "webhook", "handler")
"""The ``type`` names a ``[sinks.NAME]`` table may have."""

_KEYS = {
    "stdout": (),
    "jsonl": ("path",),
    "webhook": ("url", "secret", "headers", "format", "timeout", "follow_redirects"),
    "handler": ("handler",),
}
_REQUIRED = {"jsonl": ("path",), "webhook": ("url", "secret"), "handler": ("handler",)}


def _line(event: Event[Any]) -> str:
    return wkjson.dumps(wkjson.to_jsonable(event.to_cloudevent())) + "\n"


class StdoutSink:
    """A handler that prints each event as one line of JSON (a CloudEvent) on stdout.

    The line is written and flushed before the handler returns, so an event is
    acknowledged only once it is out of the process.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __call__(self, event: Event[Any], ctx: HandlerContext) -> None:
        """Print ``event`` (sync: the engine runs it off the event loop)."""
        line = _line(event)
        with self._lock:
            # The stream of the moment: the CLI and tests may swap sys.stdout.
            sys.stdout.write(line)
            sys.stdout.flush()

    def __repr__(self) -> str:
        return "StdoutSink()"


class JsonlSink:
    """A handler that appends each event as one line of JSON (a CloudEvent) to a file.

    Args:
        path: The file (created when missing; relative to the current directory).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()

    def __call__(self, event: Event[Any], ctx: HandlerContext) -> None:
        """Append ``event`` and flush (sync: the engine runs it off the event loop)."""
        line = _line(event)
        with self._lock, open(self.path, "a", encoding="utf-8") as out:
            out.write(line)
            out.flush()

    def __repr__(self) -> str:
        return f"JsonlSink({self.path!r})"


@dataclass(frozen=True)
class ConfigSink:
    """One sink of a configuration file.

    Attributes:
        name: The table's name; also the consumer name the sink is attached under.
        type: ``"stdout"``, ``"jsonl"``, ``"webhook"`` or ``"handler"``.
        handler: What the engine calls with each event.
        pollers: The pollers it takes (``None``: every one).
        close: Releases what the sink holds (the webhook's HTTP client), or ``None``.
    """

    name: str
    type: str
    handler: Callable[..., Any]
    pollers: Sequence[str] | None
    close: Callable[[], Awaitable[None]] | None = None


def read_sink(source: Source, path: Path, data: Any) -> ConfigSink:
    """Build the sink described by the table at ``path``.

    Raises:
        ConfigError: An unknown type or key, a missing key, a wrong type, or a handler that
            cannot be imported.
    """
    name = str(path[-1])
    try:
        check_consumer_name(name)
    except ConfigError as error:
        raise source.error(path, f"the sink's name is its consumer name: {error.message}") from None
    head = Table(source, path, data, allowed=None, required=("type",))
    kind = head.text("type", choices=SINK_TYPES)
    table = Table(
        source,
        path,
        data,
        allowed=("type", "pollers", *_KEYS[kind]),
        required=_REQUIRED.get(kind, ()),
    )
    pollers = table.strings("pollers")
    if kind == "stdout":
        return ConfigSink(name, kind, StdoutSink(), pollers)
    if kind == "jsonl":
        return ConfigSink(name, kind, JsonlSink(table.text("path")), pollers)
    if kind == "handler":
        handler = source.load((*path, "handler"), table.data["handler"])
        if not callable(handler):
            table.fail("handler", "it names something that is not callable")
        return ConfigSink(name, kind, handler, pollers)
    options: dict[str, Any] = {"url": table.text("url"), "secret": table.text("secret")}
    if "headers" in table:
        options["headers"] = table.mapping("headers", values="str")
    if "format" in table:
        options["format"] = table.text("format", choices=("cloudevents", "changes", "raw"))
    if "timeout" in table:
        options["timeout"] = table.duration("timeout")
    if "follow_redirects" in table:
        options["follow_redirects"] = table.boolean("follow_redirects")
    # Imported here: a file without a webhook does not pay for the sinks package.
    from watukuy.sinks import webhook_sink

    try:
        sink = webhook_sink(**options)
    except ConfigError as error:
        raise source.wrap(path, error) from None
    return ConfigSink(name, kind, sink, pollers, sink.aclose)

"""Append events to a Redis stream, once per event id within a window."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from watukuy.model import json as wkjson
from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError
from watukuy.model.events import Event
from watukuy.runtime.context import HandlerContext

from ._common import Target, resolve_target, target_of

__all__ = ["DEFAULT_DEDUP_WINDOW", "RedisStreamSink", "StreamAdd", "redis_stream_sink"]

DEFAULT_DEDUP_WINDOW: Final = "24h"
"""How long :func:`redis_stream_sink` remembers an event id by default."""

# One script, so the dedup marker and the entry are written together or not at all: a
# crash can never leave a marker without its entry (a lost event) or the reverse.
# KEYS: stream, marker. ARGV: window ms (> 0), maxlen ("" = none), field, value, field, value...
_APPEND_ONCE: Final = """
local seen = redis.call('GET', KEYS[2])
if seen then
  return {0, seen}
end
local id
if ARGV[2] == '' then
  id = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 3))
else
  id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, 3))
end
redis.call('SET', KEYS[2], id, 'PX', ARGV[1])
return {1, id}
"""


@dataclass(frozen=True, slots=True)
class StreamAdd:
    """What :meth:`RedisStreamSink.publish` did.

    Attributes:
        entry_id: The stream entry holding the event (the earlier one for a duplicate).
        duplicate: True when the event id was already appended within the window.
    """

    entry_id: str
    duplicate: bool


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def stream_fields(event: Event[Any]) -> dict[str, str]:
    """The entry fields of one event: the envelope, with ``data`` (and ``previous`` when
    set) as JSON text. ``attempt`` is left out: an entry records a change, not a delivery."""
    fields = {
        "id": event.id,
        "type": event.type,
        "source": event.source,
        "subject": event.subject,
        "time": event.time,
        "poller": event.poller,
        "partition": event.partition,
        "lane": event.lane,
        "sequence": str(event.sequence),
        "data": wkjson.dumps(wkjson.to_jsonable(event.data)),
    }
    if event.previous is not None:
        fields["previous"] = wkjson.dumps(wkjson.to_jsonable(event.previous))
    return fields


class RedisStreamSink:
    """Appends each event to a Redis stream, skipping ids seen within the dedup window
    (see :func:`redis_stream_sink`)."""

    def __init__(
        self,
        client: Any,
        *,
        stream: Target,
        dedup_window: Duration | None = DEFAULT_DEDUP_WINDOW,
        prefix: str = "watukuy:",
        maxlen: int | None = None,
    ) -> None:
        if not callable(getattr(client, "register_script", None)):
            raise ConfigError(
                f"expected a redis.asyncio.Redis client, got {client!r}", field="client"
            )
        self.stream: Target = target_of(stream, "stream")
        self.dedup_window_ms = (
            0 if dedup_window is None else parse_duration(dedup_window, "dedup_window")
        )
        if dedup_window is not None and self.dedup_window_ms == 0:
            raise ConfigError(
                f"expected a positive duration or None (no dedup), got {dedup_window!r}",
                field="dedup_window",
            )
        if not isinstance(prefix, str):
            raise ConfigError(f"expected a string, got {prefix!r}", field="prefix")
        self.prefix = prefix
        if maxlen is not None and (
            isinstance(maxlen, bool) or not isinstance(maxlen, int) or maxlen < 1
        ):
            raise ConfigError(f"expected an integer >= 1 or None, got {maxlen!r}", field="maxlen")
        self.maxlen = maxlen
        self._client = client
        self._script = client.register_script(_APPEND_ONCE)

    def __repr__(self) -> str:
        return f"RedisStreamSink(stream={self.stream!r}, dedup_window_ms={self.dedup_window_ms})"

    def dedup_key(self, stream: str, event_id: str) -> str:
        """The marker key of one event id in one stream."""
        return f"{self.prefix}dedup:{stream}:{event_id}"

    async def __call__(self, event: Event[Any], ctx: HandlerContext) -> None:
        """Append one event (unless already there), then ``ctx.ack()``."""
        await self.publish(event)
        ctx.ack()

    async def publish(self, event: Event[Any]) -> StreamAdd:
        """Append one event unless its id was appended within the window."""
        stream = resolve_target(self.stream, event, "stream")
        fields = stream_fields(event)
        if self.dedup_window_ms == 0:
            entry_id = await self._client.xadd(stream, fields, maxlen=self.maxlen, approximate=True)
            return StreamAdd(entry_id=_text(entry_id), duplicate=False)
        args = [str(self.dedup_window_ms), "" if self.maxlen is None else str(self.maxlen)]
        for name, value in fields.items():
            args += (name, value)
        added, entry_id = await self._script(
            keys=[stream, self.dedup_key(stream, event.id)], args=args
        )
        return StreamAdd(entry_id=_text(entry_id), duplicate=int(added) == 0)


def redis_stream_sink(
    client: Any,
    *,
    stream: Target,
    dedup_window: Duration | None = DEFAULT_DEDUP_WINDOW,
    prefix: str = "watukuy:",
    maxlen: int | None = None,
) -> RedisStreamSink:
    """A handler that appends each event to a Redis stream (``XADD``), once per id.

    The entry's fields are the envelope (``id``, ``type``, ``source``, ``subject``, ``time``,
    ``poller``, ``partition``, ``lane``, ``sequence``) plus ``data`` (and ``previous``) as
    JSON text. One Lua script checks the marker ``<prefix>dedup:<stream>:<event id>``,
    appends, and sets the marker with a TTL of ``dedup_window``, atomically, so a
    redelivered event within the window is not appended twice::

        redis = redis.asyncio.Redis.from_url("redis://127.0.0.1:6379/0")
        engine.on("orders", redis_stream_sink(redis, stream="erp:orders"))

    On Redis Cluster the stream and its markers must share a slot: put a hash tag in the
    stream name (``"{orders}:events"``) and keep braces out of ``prefix``.

    Args:
        client: A ``redis.asyncio.Redis`` client (yours to close).
        stream: The stream key, or ``(event) -> str``.
        dedup_window: How long an id is remembered; ``None`` appends every delivery.
        prefix: Prefix of the marker keys.
        maxlen: Trim the stream to about this many entries (``MAXLEN ~``).

    Raises:
        ConfigError: An argument is invalid.
    """
    return RedisStreamSink(
        client, stream=stream, dedup_window=dedup_window, prefix=prefix, maxlen=maxlen
    )

"""Send events as Celery tasks whose task id is the event id."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from watukuy.model.errors import ConfigError
from watukuy.model.events import Event
from watukuy.runtime.context import HandlerContext

from ._serialize import SinkFormat, check_format, to_sink_payload

__all__ = ["CelerySink", "celery_sink"]


class CelerySink:
    """Sends one task per event (see :func:`celery_sink`)."""

    def __init__(
        self,
        app: Any,
        task_name: str,
        *,
        format: SinkFormat = "cloudevents",
        queue: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        if not callable(getattr(app, "send_task", None)):
            raise ConfigError(f"expected a Celery app, got {app!r}", field="app")
        if not isinstance(task_name, str) or not task_name:
            raise ConfigError(f"expected a task name, got {task_name!r}", field="task_name")
        if queue is not None and (not isinstance(queue, str) or not queue):
            raise ConfigError(f"expected a queue name or None, got {queue!r}", field="queue")
        extra = dict(options or {})
        for reserved in ("task_id", "args", "kwargs"):
            if reserved in extra:
                raise ConfigError(
                    f"{reserved!r} is set by the sink (task_id is always the event id), got "
                    f"{extra[reserved]!r}",
                    field=f"options.{reserved}",
                )
        if queue is not None:
            extra["queue"] = queue
        self._app = app
        self.task_name = task_name
        self.format: SinkFormat = check_format(format)
        self.options: dict[str, Any] = extra

    def __repr__(self) -> str:
        return f"CelerySink({self.task_name!r}, format={self.format!r})"

    async def __call__(self, event: Event[Any], ctx: HandlerContext) -> None:
        """Send one task, then ``ctx.ack()``."""
        await self.publish(event)
        ctx.ack()

    async def publish(self, event: Event[Any]) -> Any:
        """Send the task for one event; returns Celery's ``AsyncResult``."""
        payload = to_sink_payload(event, self.format)
        # send_task does blocking network I/O; keep it off the event loop.
        return await asyncio.to_thread(
            self._app.send_task,
            self.task_name,
            args=(payload,),
            task_id=event.id,
            **self.options,
        )


def celery_sink(
    app: Any,
    task_name: str,
    *,
    format: SinkFormat = "cloudevents",
    queue: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> CelerySink:
    """A handler that sends each event as a Celery task, ``task_id = event.id``.

    The task receives one argument, the event as JSON data (a CloudEvent dict by default,
    the watukuy envelope with ``format="raw"``). No worker code is imported: the task is
    sent by name::

        app = Celery("erp", broker="amqp://guest:guest@127.0.0.1:5672//")
        app.conf.broker_transport_options = {"confirm_publish": True}
        engine.on("orders", celery_sink(app, "erp.tasks.order_changed", queue="orders"))

        @app.task(name="erp.tasks.order_changed")     # in the worker
        def order_changed(event: dict) -> None: ...

    Brokers keep every copy of a redelivered event; the task id says which ones are the
    same (a worker can skip a task id it has already completed). With RabbitMQ, turn on
    ``confirm_publish`` (above) so a send returns only once the broker has the message.

    Args:
        app: The Celery application.
        task_name: Registered name of the task.
        format: ``"cloudevents"`` or ``"raw"``.
        queue: The queue to send to (default: Celery's routing).
        options: More ``send_task`` options (``priority``, ``headers``, ``expires``, ...);
            ``task_id``, ``args`` and ``kwargs`` are the sink's.

    Raises:
        ConfigError: An argument is invalid.
    """
    return CelerySink(app, task_name, format=format, queue=queue, options=options)

"""``watukuy ui``: the admin page for an application's engine or a store alone, served on
127.0.0.1 with uvicorn.

Loaded only when the command is asked for (Starlette, Jinja2 and uvicorn come with the
``admin`` extra, not with the CLI). The page does not poll: the application's own processes
do; the page reads the store and makes the same administrative writes as the other commands.
On a loopback address the page is served without authentication, to the users of this
host; any other ``--host`` needs ``--token``, which the browser is then asked for as the
password of HTTP Basic authentication (:func:`watukuy.integrations.admin.basic_auth`, any
user name). With ``--json`` it prints one line of JSON once it serves
(``{"url": ..., "mode": "engine" | "store", "store": ..., "auth": "none" | "basic"}``) and
one when it stops (``{"stopped": true}``), for a script that starts it.

The page answers only to the ``Host`` it is served under: the address it listens on with
its port, ``localhost`` too on a loopback address, and the names given with
``--allow-host`` (a reverse proxy's). Any other ``Host`` answers 400 before anything is
served, so a web page that re-points its own name at 127.0.0.1 (DNS rebinding) reaches
nothing. On a wildcard address (``0.0.0.0``, ``::``) every name of the machine is its
own: without ``--allow-host`` any ``Host`` is answered, and the token protects the page.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import signal
import socket
from collections.abc import Iterator, Sequence
from typing import Any

import click

from watukuy.model import json as wkjson

from ._errors import CliError
from ._target import open_target

__all__ = ["served_hosts", "ui"]


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def served_hosts(host: str, port: int, extra: Sequence[str]) -> list[str]:
    """The ``Host`` names ``watukuy ui`` answers to, listening on ``host:port``.

    Args:
        host: The address the socket is bound to (as ``getsockname`` reports it).
        port: The port it is bound to.
        extra: The names given with ``--allow-host``.

    Returns:
        Patterns for ``admin_app(allowed_hosts=...)`` (``["*"]``: any).
    """
    address = ipaddress.ip_address(host)
    if address.is_unspecified:
        return [*extra] if extra else ["*"]
    shown = f"[{address.compressed}]" if address.version == 6 else address.compressed
    names = [f"{shown}:{port}"]
    if address.is_loopback:
        names.append(f"localhost:{port}")
    return [*names, *extra]


def _quiet_server_class() -> type[Any]:
    import uvicorn

    class QuietServer(uvicorn.Server):
        """uvicorn's server without its own signal handling: Ctrl-C and SIGTERM stop it
        cleanly (status 0) instead of being raised again once it has stopped."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

        def install_signal_handlers(self) -> None:  # uvicorn before 0.29
            return None

        def stop(self) -> None:
            self.should_exit = True

    return QuietServer


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise CliError(
            f"--port: cannot listen on {host}:{port}: {error.strerror or error}"
        ) from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


@click.command()
@click.option(
    "--app",
    "-A",
    "app",
    envvar="WATUKUY_APP",
    metavar="MODULE:ATTR|FILE.toml",
    help="The application's engine (cursors described, backfill offered), or a pollers.toml "
    "file; env WATUKUY_APP.",
)
@click.option(
    "--store",
    "store_url",
    envvar="WATUKUY_STORE",
    metavar="URL",
    help="Store URL, to operate on the keys the store holds; env WATUKUY_STORE.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=8765,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on (0: any free port).",
)
@click.option(
    "--token",
    envvar="WATUKUY_UI_TOKEN",
    metavar="TEXT",
    help="Require HTTP Basic authentication with this password (needed off 127.0.0.1); "
    "env WATUKUY_UI_TOKEN.",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="Also answer to this Host (name, name:port or *.domain; a reverse proxy's); "
    "repeatable. Other names get 400 (DNS rebinding).",
)
@click.option(
    "--refresh", default="5s", show_default=True, metavar="DURATION", help="Live refresh."
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='Print one line of JSON once serving ({"url", "mode", "store", "auth"}) and '
    '{"stopped": true} when stopped.',
)
@click.argument("file", required=False, metavar="[FILE.toml]")
def ui(
    file: str | None,
    app: str | None,
    store_url: str | None,
    host: str,
    port: int,
    token: str | None,
    allow_hosts: tuple[str, ...],
    refresh: str,
    as_json: bool,
) -> None:
    """Serve the admin page (keys, circuits, parked events, actions) on 127.0.0.1.

    FILE is a configuration file describing the pollers (pollers.toml), the same as
    --app FILE.
    """
    from watukuy.model.durations import parse_duration

    if file is not None:
        if app is not None and app != file and app != os.environ.get("WATUKUY_APP"):
            raise CliError(
                f"ui: got both the configuration file {file!r} and --app {app!r}; give one"
            )
        app = file

    parse_duration(refresh, "--refresh")
    if not _is_loopback(host) and not token:
        raise CliError(
            f"--host: {host!r} is reachable from other machines; pass --token too (the "
            "browser then asks for it when the page opens)"
        )
    if token is not None and len(token) < 12:
        raise CliError("--token: use at least 12 characters")
    try:
        import uvicorn

        from watukuy.integrations.admin import admin_app, basic_auth
        from watukuy.integrations.admin._origin import HostRule
    except ImportError:
        raise CliError(
            "watukuy ui needs Starlette, Jinja2 and uvicorn: pip install 'watukuy[admin]'"
        ) from None
    try:
        HostRule.of(allow_hosts)
    except ValueError as error:
        raise CliError(f"--allow-host: {error}") from None
    if not app and not store_url:
        root = click.get_current_context().find_root().obj or {}
        app, store_url = root.get("app"), root.get("store_url")
    quiet_server = _quiet_server_class()
    sock = _listen(host, port)

    async def serve() -> None:
        target = await open_target(command="ui", app=app, store_url=store_url)
        try:
            source = target.engine if target.engine is not None else target.operator
            bound_host, bound_port = sock.getsockname()[:2]
            page = admin_app(
                source,
                auth=None if token is None else basic_auth(None, token),
                refresh=refresh,
                allowed_hosts=served_hosts(bound_host, bound_port, allow_hosts),
            )
            shown = f"[{bound_host}]" if ":" in bound_host else bound_host
            url = f"http://{shown}:{bound_port}/"
            if as_json:
                serving = {
                    "url": url,
                    "mode": "store" if target.engine is None else "engine",
                    "store": target.label,
                    "auth": "none" if token is None else "basic",
                }
                click.echo(wkjson.dumps(serving))
            else:
                click.echo(f"watukuy ui: {url} ({target.label}); Ctrl-C stops")
            config = uvicorn.Config(page, log_level="warning", lifespan="off", access_log=False)
            server = quiet_server(config)
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, server.stop)
            await server.serve(sockets=[sock])
            click.echo(wkjson.dumps({"stopped": True}) if as_json else "watukuy ui: stopped")
        finally:
            sock.close()
            await target.close()

    try:
        asyncio.run(serve())
    finally:
        sock.close()

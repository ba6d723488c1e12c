"""Start and stop the vendors: DRF under gunicorn over PostgreSQL, and json-server.

Both are plain functions (``DrfVendor.start``, ``JsonServer.start``) that take their
folder, port and knobs as parameters, and return an object with ``base_url``,
``client_url(name)`` (the same API under ``/c/<name>``, so the vendor's access log tells
each poller's requests apart), ``requests(name)`` and ``stop()``. The pytest fixtures in
``tests/real_vendors/conftest.py`` wrap them.

DRF gets a PostgreSQL schema of its own, created here and dropped by ``stop(drop=True)``;
nothing outside it is touched. json-server 0.17 comes from npm, installed once into a
cache folder this module manages (``json_server_bin``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from .oracle import install_audit

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
JSON_SERVER_VERSION = "0.17.4"
NPM_CACHE = Path(os.environ.get("WATUKUY_RV_NPM_DIR", REPO / ".venv" / "real-vendors"))


class VendorUnavailable(RuntimeError):
    """A vendor cannot be started on this machine (no Node/npm, no PostgreSQL)."""


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    """Poll ``url`` until it answers 200, or raise with the process's log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    raise RuntimeError(f"vendor at {url} did not come up (exit {process.poll()}): {tail}")


def _terminate(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class Served:
    """A vendor process answering on ``base_url``, logging each request to ``access_log``.

    The same API answers under ``/c/<client>/``, so the log tells the clients apart.
    """

    base_url: str
    access_log: Path

    def client_url(self, name: str) -> str:
        """The API as the poller ``name`` sees it (its requests are logged under it)."""
        return f"{self.base_url}/c/{name}"

    def requests(self, name: str, path: str = "") -> int:
        """Requests the vendor answered so far under :meth:`client_url` (and ``path``)."""
        return _count(self.access_log, f"/c/{name}/{path}")

    def answered(self, name: str, status: int) -> int:
        """Requests under :meth:`client_url` that the vendor answered with ``status``."""
        if not self.access_log.exists():
            return 0
        marker, ending = f"/c/{name}/".encode(), f" {status}".encode()
        with self.access_log.open("rb") as lines:
            return sum(1 for line in lines if marker in line and line.rstrip().endswith(ending))


# --- Django REST Framework over PostgreSQL, served by gunicorn --------------------------


def drf_env(dsn: str, schema: str) -> dict[str, str]:
    """The environment of every process that runs the Django project."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "drf_site.settings",
        "PYTHONPATH": str(HERE),
        "RV_PG_DSN": dsn,
        "RV_PG_SCHEMA": schema,
    }


@dataclass
class DrfVendor(Served):
    """A running DRF vendor.

    Attributes:
        base_url: ``http://127.0.0.1:<port>``; lists at ``/orders/pages/``,
            ``/orders/offset/``, ``/orders/cursor/``, one order at ``/orders/<id>/``.
        dsn: The PostgreSQL server's URL.
        schema: The schema holding ``orders`` and ``orders_audit``.
    """

    dsn: str
    schema: str
    folder: Path
    process: subprocess.Popen[bytes]

    @classmethod
    def start(
        cls,
        folder: Path,
        dsn: str,
        *,
        schema: str | None = None,
        port: int | None = None,
        workers: int = 2,
        threads: int = 4,
    ) -> DrfVendor:
        """Create the schema, migrate, install the audit trigger and start gunicorn."""
        try:
            import psycopg
        except ImportError as error:
            raise VendorUnavailable("psycopg is not installed") from error
        schema = schema or f"rv_vendor_{uuid.uuid4().hex[:10]}"
        try:
            with psycopg.connect(dsn, autocommit=True, connect_timeout=3) as conn:
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        except psycopg.Error as error:
            raise VendorUnavailable(f"PostgreSQL is not reachable at {dsn}: {error}") from error
        folder.mkdir(parents=True, exist_ok=True)
        env = drf_env(dsn, schema)
        migrated = subprocess.run(
            [sys.executable, "-m", "django", "migrate", "--noinput", "-v", "0"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        try:
            if migrated.returncode != 0:
                raise RuntimeError(f"migrate failed: {migrated.stderr[-3000:]}")
            install_audit(dsn, schema)
        except BaseException:
            _drop_schema(dsn, schema)
            raise
        port = port or free_port()
        access_log = folder / "gunicorn-access.log"
        error_log = folder / "gunicorn.log"
        with error_log.open("ab") as err:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "gunicorn",
                    "--workers",
                    str(workers),
                    "--threads",
                    str(threads),
                    "--bind",
                    f"127.0.0.1:{port}",
                    "--access-logfile",
                    str(access_log),
                    "--access-logformat",
                    "%(m)s %(U)s?%(q)s %(s)s",
                    "--chdir",
                    str(HERE),
                    "drf_site.wsgi:application",
                ],
                env=env,
                stdout=err,
                stderr=err,
            )
        base_url = f"http://127.0.0.1:{port}"
        vendor = cls(
            base_url=base_url,
            access_log=access_log,
            dsn=dsn,
            schema=schema,
            folder=folder,
            process=process,
        )
        try:
            wait_until_up(f"{base_url}/orders/offset/?limit=1", process, error_log, 30)
        except BaseException:
            vendor.stop(drop=True)
            raise
        return vendor

    def stop(self, *, drop: bool = True) -> None:
        """Stop gunicorn and drop the schema (unless ``drop=False``)."""
        _terminate(self.process)
        if drop:
            _drop_schema(self.dsn, self.schema)


def _drop_schema(dsn: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _count(log: Path, marker: str) -> int:
    if not log.exists():
        return 0
    with log.open("rb") as lines:
        needle = marker.encode()
        return sum(1 for line in lines if needle in line)


# --- json-server from npm ----------------------------------------------------------------


def json_server_bin(cache: Path = NPM_CACHE, *, install: bool = True) -> Path:
    """json-server's entry script, installed into ``cache`` with npm the first time.

    Raises:
        VendorUnavailable: Node or npm is missing, or the install failed.
    """
    script = cache / "node_modules" / "json-server" / "lib" / "cli" / "bin.js"
    if shutil.which("node") is None:
        raise VendorUnavailable("node is not installed (json-server needs Node.js)")
    if script.exists():
        return script
    npm = shutil.which("npm")
    if npm is None or not install:
        raise VendorUnavailable("npm is not installed (it installs json-server)")
    cache.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            npm,
            "install",
            "--prefix",
            str(cache),
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            f"json-server@{JSON_SERVER_VERSION}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or not script.exists():
        raise VendorUnavailable(f"npm install json-server failed: {done.stderr[-2000:]}")
    return script


@dataclass
class JsonServer(Served):
    """A running json-server.

    Attributes:
        base_url: ``http://127.0.0.1:<port>``; the listing at ``/orders``.
        db_file: Its database, rewritten by json-server after every write.
    """

    db_file: Path
    process: subprocess.Popen[bytes]
    folder: Path

    @classmethod
    def start(
        cls,
        folder: Path,
        orders: Sequence[Mapping[str, Any]] = (),
        *,
        port: int | None = None,
        cache: Path = NPM_CACHE,
    ) -> JsonServer:
        """Write the db file with ``orders`` and start json-server on it."""
        script = json_server_bin(cache)
        folder.mkdir(parents=True, exist_ok=True)
        db_file = folder / "db.json"
        db_file.write_text(json.dumps({"orders": list(orders)}))
        port = port or free_port()
        access_log = folder / "json-server-access.log"
        server_log = folder / "json-server.log"
        with server_log.open("ab") as out:
            process = subprocess.Popen(
                [
                    "node",
                    str(script),
                    str(db_file),
                    "--port",
                    str(port),
                    "--host",
                    "127.0.0.1",
                    "--no-cors",
                    "--middlewares",
                    str(HERE / "json_server_access_log.js"),
                ],
                cwd=folder,
                env={**os.environ, "RV_ACCESS_LOG": str(access_log)},
                stdout=out,
                stderr=out,
            )
        server = cls(
            base_url=f"http://127.0.0.1:{port}",
            access_log=access_log,
            db_file=db_file,
            process=process,
            folder=folder,
        )
        try:
            wait_until_up(f"{server.base_url}/orders?_limit=1", process, server_log, 30)
        except BaseException:
            server.stop()
            raise
        return server

    def final_state(self) -> dict[int, dict[str, Any]]:
        """The orders in the db file now, by id."""
        for _ in range(20):
            try:
                data = json.loads(self.db_file.read_text())
                return {order["id"]: order for order in data["orders"]}
            except json.JSONDecodeError:  # caught mid-rewrite
                time.sleep(0.05)
        raise RuntimeError(f"{self.db_file} never parsed")

    def stop(self) -> None:
        """Stop json-server."""
        _terminate(self.process)

"""Private PostgreSQL and Redis servers for fault tests: each on a free port in a temp
directory, never the shared ones, so a test may freeze (``SIGSTOP``) or stop them."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int, process: subprocess.Popen[bytes], seconds: float = 30) -> None:
    give_up = time.monotonic() + seconds
    while time.monotonic() < give_up:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port} after {seconds} s")


class PrivateServer:
    """A private server process and the children it forks (PostgreSQL backends)."""

    def __init__(self, process: subprocess.Popen[bytes], port: int) -> None:
        self.process = process
        self.port = port

    def _family(self) -> list[int]:
        """The server and its children (PostgreSQL backends start sessions of their own,
        so a signal to the process group would miss them)."""
        pids = [self.process.pid]
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.process.pid:
                pids.append(int(entry.name))
        return pids

    def freeze(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)  # first: it forks no new backend now
        for pid in self._family():
            _signal(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        for pid in reversed(self._family()):
            _signal(pid, signal.SIGCONT)

    def stop(self) -> None:
        # A backend that ends between the listing and the signal must not spare the server:
        # the server itself is always signalled and waited for.
        self.thaw()
        if not _signal(self.process.pid, signal.SIGTERM):
            self.process.wait()
            return
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()


def _signal(pid: int, sig: signal.Signals) -> bool:
    """Send ``sig`` to ``pid``; ``False`` when the process is already gone."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def _postgres_user() -> dict[str, Any]:
    """``postgres`` refuses to run as root: as root, run it as the ``postgres`` user."""
    if os.geteuid() != 0:
        return {}
    try:
        entry = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("running as root and there is no 'postgres' user to run a server as")
    return {"user": "postgres", "group": entry.pw_gid}


def private_postgres(password: str) -> Iterator[PrivateServer]:
    """A private PostgreSQL (user ``postgres`` with ``password``, database ``postgres``),
    stopped and removed when the generator closes."""
    initdb, postgres = shutil.which("initdb"), shutil.which("postgres")
    if initdb is None or postgres is None:
        pytest.skip("initdb/postgres are not installed")
    run_as = _postgres_user()
    # Not under tmp_path: as root, its parents are closed to the postgres user.
    home = Path(tempfile.mkdtemp(prefix="watukuy-pg-"))
    (home / "pw").write_text(password)
    if run_as:
        shutil.chown(home, user="postgres")
        shutil.chown(home / "pw", user="postgres")
    data = home / "data"
    subprocess.run(
        [initdb, "-D", str(data), "-U", "postgres", "--auth=scram-sha-256",
         f"--pwfile={home / 'pw'}", "-E", "UTF8", "--no-sync"],
        check=True, capture_output=True, **run_as,
    )  # fmt: skip
    port = free_port()
    process = subprocess.Popen(
        [postgres, "-D", str(data), "-p", str(port), "-c", "listen_addresses=127.0.0.1",
         "-c", f"unix_socket_directories={home}", "-c", "fsync=off"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, **run_as,
    )  # fmt: skip
    server = PrivateServer(process, port)
    try:
        wait_for_port(port, process)
        time.sleep(0.5)  # accepting TCP is not yet accepting logins
        yield server
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)


def private_redis(directory: Path) -> Iterator[PrivateServer]:
    """A private ``redis-server`` that keeps nothing on disk, stopped when the generator
    closes."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(directory)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    server = PrivateServer(process, port)
    try:
        wait_for_port(port, process)
        yield server
    finally:
        server.stop()

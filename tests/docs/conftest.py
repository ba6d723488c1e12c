"""Servers for the docs blocks that need one: a database of their own, a local SQS."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator

import pytest


@pytest.fixture
def docs_database(postgres_url: str) -> Iterator[str]:
    """A PostgreSQL database of this block's own (blocks use the default schema and their
    own tables), dropped afterwards: the URL a reader's ``DATABASE_URL`` would hold."""
    import psycopg

    name = f"wk_docs_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = postgres_url.rpartition("/")
    yield f"{base}/{name}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def sqs_endpoint() -> Iterator[str]:
    """A local SQS-compatible server (moto in server mode) on an ephemeral port."""
    from moto.server import ThreadedMotoServer  # a development dependency: never skipped

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()

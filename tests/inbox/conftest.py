"""The ``consumer`` fixture: a migrated consumer of every kind (``inbox_kinds``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from inbox_kinds import KINDS_POSTGRES, KINDS_SQLITE, Consumer, build


@pytest.fixture(
    params=[
        *KINDS_SQLITE,
        *[pytest.param(kind, marks=pytest.mark.postgres) for kind in KINDS_POSTGRES],
    ]
)
async def consumer(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Consumer]:
    """A migrated consumer of each kind, on SQLite files and on the local PostgreSQL."""
    kind: str = request.param
    url = request.getfixturevalue("postgres_url") if kind in KINDS_POSTGRES else None
    built = build(kind, tmp_path, url)
    await built.setup()
    await built.migrate()
    try:
        yield built
    finally:
        await built.close()

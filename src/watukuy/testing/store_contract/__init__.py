"""The store contract suite: one set of tests every :class:`~watukuy.model.ports.StateStore`
must pass, shipped so that a third-party store can certify itself.

Subclass :class:`StoreContract` in a test module and override the ``store`` fixture with one
that yields a fresh, empty, migrated store and closes it afterwards::

    import pytest
    from watukuy.testing.store_contract import StoreContract

    class TestMyStore(StoreContract):
        @pytest.fixture
        async def store(self):
            s = MyStore(...)
            await s.migrate()
            yield s
            await s.close()

What your pytest configuration needs: `pytest-asyncio <https://pypi.org/project/pytest-asyncio/>`_
and `hypothesis <https://pypi.org/project/hypothesis/>`_ installed, and ``asyncio_mode = "auto"`` under ``[tool.pytest.ini_options]`` (watukuy's own
configuration). In strict mode the tests still run (the class carries the ``asyncio`` mark),
but your fixture must then be declared with ``@pytest_asyncio.fixture``.

The suite adapts to :attr:`StateStore.capabilities` instead of skipping: when a store says
``log=False`` (or ``streaming=False``), the log (streaming) tests assert that the store
raises a :class:`~watukuy.WatukuyError` with code ``"UNSUPPORTED"``; with
``transactions=False`` the atomicity tests only assert that the failure surfaces and that
the lease survives it.

**How atomicity is tested.** ``commit_poll`` must write everything or nothing, so the suite
seeds a key, then commits a batch whose *last* element cannot be written, and checks that
the key reads back exactly as it was (state, lease, items, outbox, parked rows, held keys,
validators, log) and that the store is still usable. Two levers work on any store without
knowing how it is built:

* a JSON-typed field the store has to encode holds a value no JSON codec accepts (an error
  dictionary containing ``object()`` on the last outbox or parked row, or a cursor in the
  state patch), so the failure happens wherever the store encodes; and
* one of the batch's sequences raises when its last element is read, so a store that
  streams rows into an open transaction fails half-way through it.

The store may raise :class:`~watukuy.StoreError`, ``TypeError``/``ValueError`` (codec
errors) or let the injected exception through; never ``LeaseLostError``.

**Layout.** The tests are grouped by concern, one mixin class per private module
(``_leases``, ``_state``, ``_items``, ``_commit``, ``_outbox``, ``_parked``, ``_validators``,
``_log``, ``_due``, ``_payloads``; their shared data and helpers are in ``_support``).
:class:`StoreContract` gathers them all and is the one class to subclass.
"""

from __future__ import annotations

from typing import ClassVar

import pytest

from watukuy.model.ports import StateStore

from ._commit import CommitContract
from ._due import DueIndexContract
from ._items import ItemContract
from ._leases import LeaseContract
from ._log import EventLogContract
from ._outbox import OutboxContract
from ._parked import ParkedContract
from ._payloads import PayloadContract
from ._state import StateContract
from ._support import (
    KEY,
    KEY_B,
    KEY_OTHER,
    T0,
    TTL,
    batch,
    event_json,
    item_row,
    outbox_row,
    parked_invalid,
    parked_poison,
)
from ._validators import ValidatorContract

__all__ = [
    "KEY",
    "KEY_B",
    "KEY_OTHER",
    "T0",
    "TTL",
    "StoreContract",
    "batch",
    "event_json",
    "item_row",
    "outbox_row",
    "parked_invalid",
    "parked_poison",
]


# pytest collects inherited tests base by base in reverse MRO order, so the bases are listed
# from the last concern to the first and the tests run in the order of the concerns.
class StoreContract(
    PayloadContract,
    DueIndexContract,
    EventLogContract,
    ValidatorContract,
    ParkedContract,
    OutboxContract,
    CommitContract,
    ItemContract,
    StateContract,
    LeaseContract,
):
    """Base class of the contract suite; subclass it and override the ``store`` fixture.

    Every test receives a fresh, empty, migrated store. The suite never sleeps and uses
    fixed times around :data:`T0`.
    """

    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [pytest.mark.asyncio]

    @pytest.fixture
    async def store(self) -> StateStore:
        """Override me: yield a fresh, empty, migrated store and close it afterwards."""
        pytest.fail(f"{type(self).__name__} must override the `store` fixture")

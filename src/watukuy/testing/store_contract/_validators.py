"""Store contract tests of the HTTP validators."""

from __future__ import annotations

from watukuy.model.ports import StateStore
from watukuy.model.rows import PKey, Validator

from ._support import _URL, KEY, KEY_B, T0, _acquire, _everything, _seed


class ValidatorContract:
    """HTTP validators (ETag, Last-Modified), per key and URL."""

    async def test_validators_round_trip_and_overwrite(self, store: StateStore) -> None:
        lease = await _acquire(store)
        assert await store.get_validator(KEY, "u-1") is None
        first = Validator('"abc"', "Wed, 21 Oct 2015 07:28:00 GMT", T0)
        await store.set_validator(KEY, lease, "u-1", first)
        assert await store.get_validator(KEY, "u-1") == first
        cleared = Validator(None, None, T0 + 1)
        await store.set_validator(KEY, lease, "u-1", cleared)
        assert await store.get_validator(KEY, "u-1") == cleared
        await store.set_validator(KEY, lease, "u-2", first)
        assert await store.get_validator(KEY, "u-2") == first
        assert await store.get_validator(KEY, "u-3") is None
        assert await store.get_validator(KEY_B, "u-2") is None

    async def test_clear_validators_forgets_the_validators_of_the_key_only(
        self, store: StateStore
    ) -> None:
        lease = await _seed(store, KEY)
        await store.set_validator(KEY, lease, "u-2", Validator(None, "Thu, 01 Jan 2026", T0))
        await _seed(store, KEY_B)
        before = await _everything(store, KEY)
        other_before = await _everything(store, KEY_B)
        # An admin write: unfenced, and it works while another instance holds the lease.
        await store.clear_validators(KEY)
        assert await store.get_validator(KEY, _URL) is None
        assert await store.get_validator(KEY, "u-2") is None
        after = await _everything(store, KEY)
        for field in ("state", "items", "count_items", "pending", "parked", "held", "log"):
            assert after.get(field) == before.get(field), field
        assert await store.get_lease(KEY) == lease
        assert await _everything(store, KEY_B) == other_before
        # The key's lease still fences: validators stored afterwards are kept as usual.
        fresh = Validator('"etag-2"', None, T0 + 1)
        await store.set_validator(KEY, lease, _URL, fresh)
        assert await store.get_validator(KEY, _URL) == fresh
        await store.clear_validators(PKey("never-seen"))  # a key without any: a no-op
        assert await store.list_keys() == [KEY, KEY_B]

"""The pollers under test that are described only in TOML (``toml/*.toml``).

Each file describes one poller, ``orders``, the way a user writes it for ``watukuy run``:
the endpoint, where the items are, identity and version, a paginator and, where the
listing needs one, a reconcile pass. Nothing in them is Python. The vendor's base URL
comes in as ``${VENDOR_URL}``, and the knobs a run sets (schedule, reconcile cadence,
page size) as ``${RV_*}`` variables with defaults in the file; :func:`build` loads a file
with ``watukuy.rest.load_config`` and hands back its poller, which :mod:`.engine_child`
runs like any other recipe (same store, journal, kills and restarts).

| recipe | file | mode the description implies | vendor endpoint |
|---|---|---|---|
| ``toml-keyset`` (DRF) | ``drf-keyset.toml`` | keyset: ``updated_at__gte`` + ``after_id``, ``next`` null ends | DRF limit/offset |
| ``toml-overlap`` (DRF) | ``drf-keyset-overlap.toml`` | the same with ``overlap = "2m"`` | DRF limit/offset |
| ``toml-token`` (DRF) | ``drf-token.toml`` | token (``next_url``) + a page-number reconcile | DRF ``CursorPagination``; ``PageNumberPagination`` |
| ``toml-snapshot`` (DRF) | ``drf-pages.toml`` | full listing (``page_number``, ``next`` null ends) | DRF ``PageNumberPagination`` |
| ``toml-not-found`` (DRF) | ``drf-pages-not-found.toml`` | full listing ending at DRF's ``404`` past the end | DRF ``PageNumberPagination`` |
| ``toml-wedge-gone`` (DRF) | ``drf-pages-two-per-cycle.toml`` | ``toml-snapshot`` in pages of 50, two a cycle | the same (:func:`.scenario.run_wedge`) |
| ``toml-keyset`` (json) | ``json-keyset.toml`` | keyset: ``updatedAt_gte``, ``_limit``, short page ends | json-server 0.17 |
| ``toml-overlap`` (json) | ``json-keyset-overlap.toml`` | the same with ``overlap = "2m"`` | json-server 0.17 |
| ``toml-pages`` (json) | ``json-pages.toml`` | full listing (``_page`` + ``_limit``, short page ends) | json-server 0.17 |
| ``toml-link`` (json) | ``json-link.toml`` | full listing following the ``Link`` header | json-server 0.17 |
| ``toml-offset`` (json) | ``json-offset.toml`` | full listing by offset (``_start`` + ``_limit``, short page ends) | json-server 0.17 |

These recipes are not copies of docs code, so ``test_recipes_follow_the_docs.py`` holds
them to a rule of their own: their fetch is the one ``watukuy.rest`` builds.

Like :mod:`.recipes`, this module imports only the public ``watukuy`` API and the
standard library (``watukuy.rest`` only when a file is loaded, so an older checkout's
interpreter can still run the other recipes).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

FOLDER = Path(__file__).resolve().with_name("toml")
PREFIX = "toml-"
TOML_RECIPES: dict[str, dict[str, str]] = {
    "drf": {
        "toml-keyset": "drf-keyset.toml",
        "toml-overlap": "drf-keyset-overlap.toml",
        "toml-token": "drf-token.toml",
        "toml-snapshot": "drf-pages.toml",
        "toml-not-found": "drf-pages-not-found.toml",
        "toml-wedge-gone": "drf-pages-two-per-cycle.toml",
    },
    "json": {
        "toml-keyset": "json-keyset.toml",
        "toml-overlap": "json-keyset-overlap.toml",
        "toml-pages": "json-pages.toml",
        "toml-link": "json-link.toml",
        "toml-offset": "json-offset.toml",
    },
}
FULL_LISTING = frozenset(
    {"toml-snapshot", "toml-not-found", "toml-pages", "toml-link", "toml-offset"}
)
"""TOML recipes whose live lane reads the whole listing every cycle (deletes observable)."""
POLLER = "orders"


def is_toml(recipe: str) -> bool:
    """Whether ``recipe`` names a poller described in a TOML file."""
    return recipe.startswith(PREFIX)


def path_of(vendor: str, recipe: str) -> Path:
    """The file of ``recipe`` for ``vendor``."""
    files = TOML_RECIPES.get(vendor, {})
    if recipe not in files:
        raise ValueError(f"no TOML recipe {recipe!r} for {vendor!r}; known: {', '.join(files)}")
    return FOLDER / files[recipe]


def environment(base: str, knobs: Mapping[str, Any]) -> dict[str, str]:
    """The variables a file is loaded with: ``VENDOR_URL`` and each knob as ``RV_<NAME>``.

    ``schedule={"min": ..., "max": ...}`` becomes ``RV_SCHEDULE_MIN`` / ``RV_SCHEDULE_MAX``,
    ``reconcile_every`` ``RV_RECONCILE_EVERY``, ``page_size`` ``RV_PAGE_SIZE``.
    """
    env = {**os.environ, "VENDOR_URL": base}
    for name, value in knobs.items():
        if isinstance(value, Mapping):
            for part, inner in value.items():
                env[f"RV_{name.upper()}_{part.upper()}"] = str(inner)
        else:
            env[f"RV_{name.upper()}"] = str(value)
    return env


def build(vendor: str, recipe: str, base: str, **knobs: Any) -> Any:
    """The poller of the TOML recipe ``recipe`` for ``vendor`` at ``base``."""
    from watukuy import rest

    config = rest.load_config(path_of(vendor, recipe), env=environment(base, knobs))
    return poller_of(config)


def poller_of(config: Any) -> Any:
    """The one poller a loaded file describes."""
    pollers = config.pollers
    found = list(pollers.values()) if isinstance(pollers, Mapping) else list(pollers)
    if len(found) != 1:
        raise ValueError(f"a TOML recipe describes one poller, not {len(found)}")
    return found[0]

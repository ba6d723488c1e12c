"""The real-vendor tier: real server software, polled the way our docs teach.

- :mod:`.vendors` starts the vendors: a Django REST Framework API (``drf_site``) served
  by gunicorn over a PostgreSQL schema of its own, and ``json-server`` from npm.
- :mod:`.writers` changes them the way real clients do: transactions held open after
  the stamp (DRF), writes sent seconds after they were stamped (json-server), tied bulk
  stamps, deletes and re-creations.
- :mod:`.oracle` reads what really happened from the vendor's own history: a commit-time
  audit table (a deferred constraint trigger) for PostgreSQL, the writers' log and the
  db file for json-server.
- :mod:`.recipes` holds the pollers as a user writes them from the README and the docs,
  and :mod:`.toml_recipes` the same endpoints described only in TOML (``toml/*.toml``,
  loaded with ``watukuy.rest.load_config``); :mod:`.engine_child` runs one of them in its
  own process (any checkout's interpreter).
- :mod:`.scenario` runs writers and engines together, with kills, and :mod:`.checks`
  holds the deliveries against the oracle and computes the figures.

Nothing here is imported by the package: it is test code, reused by later tiers through
the functions and fixtures it exposes (every vendor takes its base URL, port and knobs as
parameters).
"""

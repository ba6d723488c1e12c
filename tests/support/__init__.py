"""Test doubles shared by several test directories.

Importable as ``support`` from any test: ``tests/`` holds the root ``conftest.py`` and no
``__init__.py``, so pytest puts it on ``sys.path`` before it collects a test.

* :mod:`support.servers`: a scripted HTTP/1.1 server on real sockets, and a ``ctx.http``
  bound the way the engine binds it.
* :mod:`support.vendors`: vendor APIs behind ``httpx`` transports (no sockets): an empty
  listing that logs arrivals on a virtual clock, and a keyset listing.
* :mod:`support.rest_vendors`: vendor APIs on real sockets for declarative REST pollers
  (GitHub-style ``Link`` pages, Stripe-style ``starting_after``, an OAuth2
  client-credentials server), over item tables that tests change between cycles.
"""

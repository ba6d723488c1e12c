"""watukuy over real HTTP, next to the plainest script doing the same work.

Everything runs in fresh processes, measured from the outside (wall from spawn to exit,
CPU of every thread and peak RSS from ``os.wait4``); the vendor is a process of its own on
127.0.0.1 (:mod:`bench.http.vendor`), so the client's cost is a real socket's. The
children run in ``.venv-bench``, a venv holding ``watukuy[postgres-binary]`` and nothing
else, the way a user installs it (:mod:`bench.http._venv`; created on first use).

Scenarios (``python -m bench.http [scenario ...] [--quick]``, or ``python -m bench http``):

* ``startup``: ``import watukuy`` (median of 5 runs of ``python -X importtime``) and
  ``watukuy --help`` (median of 5 whole processes).
* ``sync``: 100,000 orders of about 400 bytes (a nested object and one to four lines), 50
  per timestamp, in keyset pages of 1,000, from each vendor shape of
  :mod:`bench.http._workload` (``--shapes``): ``asyncio``, HTTP/1.1 with keep-alive, stamps
  to the second and ids in time order; ``stdlib``, the standard library's
  ``ThreadingHTTPServer`` over HTTP/1.0 (a new connection per page), millisecond stamps,
  shuffled ids and a ``null`` field. The floor (:mod:`bench.http.floor`) and the engine
  (:mod:`bench.http.engine_child`: one ``tick()``, a no-op handler) read both with the
  same logic, and every run's line shows the connections the vendor accepted during it.
  With no delay at the vendor, for each store (SQLite, and PostgreSQL when it answers) and
  each of 3 rounds, on fresh databases: the floor and the engine run one after the other
  on the initial sync, then in 5 pairs after 1% of the orders changed (again before each
  pair), then in 5 pairs with nothing changed; the pairs alternate who runs first. Each
  ratio is the median over its pairs: a run of 0.2 s moves by a third with the host's
  speed, which one pair cannot tell from the engine's. Targets, per shape: the engine's
  initial sync at 0.7x the floor's items/s on SQLite and 0.5x on PostgreSQL; the
  1%-changed run within 1.5x and the nothing-changed run within 1.25x of the floor's
  wall; 100 MB of peak RSS for the initial sync. Then the vendor waits before every page
  (``--latency-ms``, 20, 50 and 100 ms by default): the initial sync on SQLite, one pair
  per round, its items/s share reported next to the time the waits alone take. A table
  closes the scenario: the initial sync's share per store, shape and delay.
* ``dispatch``: 100,000 pending events (an initial sync without a handler) delivered by
  one ``tick()`` to a no-op handler on SQLite; target 30,000 events/s.
* ``partitions``: 2,000 and 10,000 partitions of one poller against a vendor answering in
  100 ms, ``Budget(150, "1s")``, ``Schedule(min="10s", max="30s")``, SQLite, 90 s, with an
  explicit ``httpx.AsyncClient`` and with the engine's default one
  (:mod:`bench.http.partitions_child`). Targets: every tenant polled and no gap between
  two of its polls (nor from its last poll to the end) over ``schedule.max`` x 1.1,
  event-loop lag p99 at most 100 ms, never more requests arriving at the vendor in any
  second than the budget allows. 10,000 partitions need 333 polls/s to keep a 30 s
  schedule, more than the budget's 150/s, so their gap figures are reported, not met.

``python -m bench.http.timeline --shape stdlib --items 20000`` times one engine sync from
the inside (:mod:`bench.http.timeline`): what the SQLite thread spent per call, what the
event loop waited for, and how much of each commit the next page's fetch overlapped.

``--quick`` runs one round of 20,000 orders (3 pairs per short phase; delays of 0 and
50 ms), 20,000 events and 300 partitions on a 6 s schedule for 20 s. The exit status is 1
when a target is missed.
"""

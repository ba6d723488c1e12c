"""The scale harness: thousands of partitions, replicas on a shared store, a million items.

Run it with ``make bench-scale`` (``python -m bench.scale``); ``--help`` lists the
scenarios and their knobs. Every figure is printed in one table next to its target with
pass/fail, and ``--json PATH`` writes the same figures (with the raw details) for tools.

The scenarios, each in its own module:

* :mod:`bench.scale.partitions`: 1,000 and 10,000 partitions of one poller in one process
  on ``SqliteStore``, driven on a ``VirtualClock`` against an in-process ``FakeApi``.
* :mod:`bench.scale.replicas`: three replica processes (:mod:`bench.scale.replica`) on one
  ``PostgresStore`` or ``RedisStore`` polling a ``FakeApi`` served over real HTTP, with a
  SIGKILL in the middle.
* :mod:`bench.scale.throughput`: the same backlog synced by one replica and by three.
* :mod:`bench.scale.snapshot`: a snapshot diff over a million items in a child process
  (:mod:`bench.scale.snapshot_child`), its peak RSS and items/s.
"""

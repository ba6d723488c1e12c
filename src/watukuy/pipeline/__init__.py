"""What a page and a pass do to the stored rows: pure functions, no I/O.

- :mod:`watukuy.pipeline.page`: one page's journey from the items a ``fetch`` returned to
  the events, rows and links a commit writes, and what the pass learned; its rules
  (:mod:`watukuy.pipeline.rules`) are what a poller says about its pages.
- :mod:`watukuy.pipeline.events`: the events of a page or of a pass's deletes (their ids,
  outbox text, and the event a hook observes).
- :mod:`watukuy.pipeline.deletes`: the pass and delete-confirmation policy: which missed
  rows a complete pass may delete, hold, or keep waiting for a proof.

Plain data in, plain data out: the runtime's lane only fetches, calls these, commits and
hands over; the unit tests call them with no engine and no store.
"""

from __future__ import annotations

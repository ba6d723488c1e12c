"""``python -m watukuy``: the ``watukuy`` command (see :mod:`watukuy.cli`)."""

from __future__ import annotations

from watukuy.cli import main

if __name__ == "__main__":
    main()

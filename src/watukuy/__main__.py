"""``python -m watukuy``: the ``watukuy`` command (see :mod:`watukuy.cli`)."""

from __future__ import annotations

import sys

from watukuy.cli import main

if __name__ == "__main__":
    sys.exit(main())

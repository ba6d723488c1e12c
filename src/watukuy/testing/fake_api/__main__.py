"""Run the fake API server: ``python -m watukuy.testing.fake_api --help``."""

from __future__ import annotations

from ._cli import main

if __name__ == "__main__":
    raise SystemExit(main())

"""watukuy over real HTTP next to a bare script; see :mod:`bench.http`.

``make bench`` runs it at full size; ``python -m bench http --quick`` is the short form.
"""

from __future__ import annotations

from bench.http.__main__ import main as _main


def main(argv: list[str] | None = None) -> None:
    """Entry point used by ``make bench`` (``python -m bench http [--quick ...]``)."""
    _main(argv or [])


if __name__ == "__main__":
    main()

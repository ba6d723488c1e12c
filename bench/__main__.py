"""Run the benchmarks: every ``bench/bench_*.py`` module's ``main()`` in turn.

Usage::

    python -m bench               # all of them
    python -m bench diff stores   # only bench_diff and bench_stores
    python -m bench http --quick  # options (``--...``) go to the modules whose main() takes them

A benchmark that crashes is reported and the others still run; the exit status is then 1.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
import traceback

import bench


def available() -> list[str]:
    """Names of the benchmark modules, without the ``bench_`` prefix, sorted."""
    return sorted(
        info.name.removeprefix("bench_")
        for info in pkgutil.iter_modules(bench.__path__)
        if info.name.startswith("bench_")
    )


def main(argv: list[str]) -> int:
    """Run the named benchmarks (all when none is named); return the exit status."""
    names = available()
    options = [arg for arg in argv if arg.startswith("-")]
    wanted = [
        arg.removeprefix("bench_").removesuffix(".py") for arg in argv if not arg.startswith("-")
    ] or names
    unknown = [name for name in wanted if name not in names]
    if unknown:
        print(
            f"unknown benchmark(s): {', '.join(unknown)}; available: {', '.join(names)}",
            file=sys.stderr,
        )
        return 2
    failed = 0
    for name in wanted:
        print(f"== bench_{name} ==", flush=True)
        try:
            entry = importlib.import_module(f"bench.bench_{name}").main
            if options and inspect.signature(entry).parameters:
                entry(options)
            else:
                entry()
        except Exception:
            failed += 1
            traceback.print_exc()
        print(flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

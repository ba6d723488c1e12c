"""The daemon never goes quiet while a key is overdue: requests per second at the vendor.

Twenty keys share ``Budget(10, "1s")`` and each wants a poll every 50 ms, so every key is
overdue all the time and the budget alone paces the polls. The vendor
(:mod:`bench.http.vendor`, in its own process, answering after ``--latency-ms`` and up to
``--jitter-ms`` more, so that runs end at every phase of the budget's pace) stamps
each request as it arrives; the engine (:mod:`bench.overdue_child`) runs in a process of
its own for ``--seconds``. Each run reports its requests per second and its *silent
seconds*: whole seconds of the engine's run in which the vendor heard nothing. With a
budget that grants ten a second and keys always overdue, the figure to hold is zero, in
every run.

Usage::

    python -m bench overdue                              # 3 runs of 20 s
    python -m bench overdue --runs=12 --seconds=60       # the full measurement
    python -m bench overdue --latency-ms=95 --resync-every=60s
"""

from __future__ import annotations

import argparse
import itertools
import statistics

from bench.http._proc import VendorProcess, compile_package, measure


def per_second(arrivals: list[float], started: float, stopped: float) -> list[int]:
    """Arrivals in each whole second from ``started`` (the last partial second dropped)."""
    counts = [0] * int(stopped - started)
    for at in arrivals:
        second = int(at - started)
        if 0 <= second < len(counts):
            counts[second] += 1
    return counts


def longest_gap(arrivals: list[float], started: float, stopped: float) -> float:
    """The longest stretch (seconds) of the run without an arrival."""
    stamps = [started, *sorted(a for a in arrivals if started <= a <= stopped), stopped]
    return max(b - a for a, b in itertools.pairwise(stamps))


def main(argv: list[str] | None = None) -> int:
    """Run the measurement; the exit status is 1 when any run had a silent second."""
    parser = argparse.ArgumentParser(prog="python -m bench overdue")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--latency-ms", type=float, default=40.0)
    parser.add_argument("--jitter-ms", type=float, default=60.0)
    parser.add_argument("--interval-ms", type=int, default=50)
    parser.add_argument("--resync-every", default="15s")
    args = parser.parse_args(argv)
    compile_package()
    silent_runs = 0
    with VendorProcess(items=1, latency_ms=args.latency_ms, jitter_ms=args.jitter_ms) as vendor:
        for run in range(1, args.runs + 1):
            vendor.post("/_reset")
            child = measure(
                "bench.overdue_child",
                "--api",
                vendor.url,
                "--seconds",
                str(args.seconds),
                "--interval-ms",
                str(args.interval_ms),
                "--resync-every",
                args.resync_every,
            )
            started, stopped = child.out["started"], child.out["stopped"]
            arrivals = [
                at for stamps in vendor.get("/_stats")["arrivals"].values() for at in stamps
            ]
            counts = per_second(arrivals, started, stopped)
            silent = [second for second, count in enumerate(counts) if count == 0]
            silent_runs += bool(silent)
            print(
                f"run {run:2d}: {len(arrivals)} requests in {stopped - started:.1f} s, "
                f"per second min {min(counts)} median {statistics.median(counts):g} "
                f"max {max(counts)}, longest gap {longest_gap(arrivals, started, stopped):.2f} s, "
                f"silent seconds {silent or 'none'}, failed cycles {len(child.out['errors'])}",
                flush=True,
            )
    print(f"{silent_runs} of {args.runs} runs had a silent second (target: 0)", flush=True)
    return 1 if silent_runs else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``make mutants``: apply each mutant of the ledger to a copy of the tree; its tests must fail.

Usage::

    python tests/guarantees/mutants.py [--only NAME[,NAME...]] [--list] [--timeout SECONDS]

The working tree (tracked and untracked files that git does not ignore, uncommitted edits
included) is copied once into a temporary directory. For each mutant the runner applies its
search/replace edits to that copy, runs only the tests the mutant names (``pytest -x``,
with the copy's ``src`` first on ``PYTHONPATH`` and no bytecode cache), and restores the
file. A mutant is killed when a test fails or errors; it survives when its tests pass.
Then every test that killed something is run once on the unmutated copy: a test that fails
there proves nothing, and fails the run too.

Exit status: 0 when every mutant was killed by a test that passes without it; 1 otherwise
(a survivor, a mutant that no longer applies, a broken run or a failing killer).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ledger import GUARANTEES, MUTANTS, Mutant

ROOT = Path(__file__).resolve().parents[2]
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


class NoLongerApplies(Exception):
    """A mutant's fragment is not (exactly once) in its file."""


def mutated_text(mutant: Mutant, text: str) -> str:
    """``text`` with the mutant's edits applied; raises :class:`NoLongerApplies`."""
    for fragment, replacement in mutant.edits:
        count = text.count(fragment)
        if count != 1:
            found = "is gone" if count == 0 else f"occurs {count} times"
            raise NoLongerApplies(
                f"mutant {mutant.name} no longer applies: its fragment {fragment[:60]!r} "
                f"{found} in {mutant.path}"
            )
        text = text.replace(fragment, replacement)
    return text


def check_all_apply(root: Path) -> list[str]:
    """The problems of every mutant against the tree at ``root`` (empty: all apply)."""
    problems: list[str] = []
    for mutant in MUTANTS:
        path = root / mutant.path
        if not path.is_file():
            problems.append(f"mutant {mutant.name} no longer applies: {mutant.path} is gone")
            continue
        try:
            mutated_text(mutant, path.read_text("utf-8"))
        except NoLongerApplies as error:
            problems.append(str(error))
        if mutant.guarantee not in GUARANTEES:
            problems.append(f"mutant {mutant.name}: unknown guarantee {mutant.guarantee!r}")
    return problems


def _tree_files(root: Path) -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout.decode()
    return [name for name in listed.split("\0") if name and (root / name).is_file()]


def copy_tree(root: Path, into: Path) -> None:
    """Copy the working tree (what git tracks or would track) into ``into``."""
    for name in _tree_files(root):
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)


@dataclass(slots=True)
class Outcome:
    """What running some tests on the copy gave."""

    status: str  # "killed", "survived", "broken", "timeout"
    killer: str
    seconds: float
    output: str


def run_tests(copy: Path, tests: tuple[str, ...], *, stop_first: bool, timeout: float) -> Outcome:
    """Run ``tests`` with pytest in ``copy``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(copy / "src"), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a restored file must never meet a mutant's .pyc
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "--no-header",
        "-rfE",
        # Python's own tracebacks: pytest's long ones parse the failing test's source
        # again, and on CPython 3.11.7 that parse failed now and then with "AST
        # constructor recursion depth mismatch", an internal error instead of a verdict.
        "--tb=native",
        "-p",
        "no:cacheprovider",
    ]
    if stop_first:
        command.append("-x")
    started = time.monotonic()
    try:
        done = subprocess.run(
            [*command, *tests],
            cwd=copy,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as expired:
        output = expired.stdout if isinstance(expired.stdout, str) else ""
        return Outcome(
            "timeout", f"(no verdict in {timeout:.0f}s)", time.monotonic() - started, output
        )
    seconds = time.monotonic() - started
    output = done.stdout + done.stderr
    failed = _FAILED.findall(output)
    if done.returncode == 0:
        return Outcome("survived", "", seconds, output)
    if done.returncode == 1 and failed:
        return Outcome("killed", failed[0], seconds, output)
    return Outcome("broken", f"(pytest exit {done.returncode})", seconds, output)


def _check_copy_is_used(copy: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(copy / "src"), PYTHONDONTWRITEBYTECODE="1")
    found = subprocess.run(
        [sys.executable, "-c", "import watukuy; print(watukuy.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(found).resolve().is_relative_to(copy.resolve()):
        raise SystemExit(f"the copy is not the watukuy that tests import (they import {found})")


def _row(cells: list[str], widths: list[int]) -> str:
    return (
        "| "
        + " | ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True))
        + " |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated mutant names")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per mutant")
    parser.add_argument("--verbose", action="store_true", help="print pytest output of survivors")
    args = parser.parse_args(argv)

    chosen = list(MUTANTS)
    if args.only:
        names = {name.strip() for name in args.only.split(",") if name.strip()}
        unknown = names - {m.name for m in MUTANTS}
        if unknown:
            parser.error(f"unknown mutant(s): {', '.join(sorted(unknown))}")
        chosen = [m for m in MUTANTS if m.name in names]
    if args.list:
        for mutant in chosen:
            print(f"{mutant.name:48} {mutant.guarantee:28} {mutant.bug}")
        return 0

    problems = check_all_apply(ROOT)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1

    widths = [44, 30, 86, 7]
    failures: list[str] = []
    killers: dict[str, list[str]] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="watukuy-mutants-") as temp:
        copy = Path(temp)
        copy_tree(ROOT, copy)
        _check_copy_is_used(copy)
        print(f"{len(chosen)} mutant(s) on a copy of {ROOT} in {copy}\n", flush=True)
        print(_row(["mutant", "guarantee", "killed by", "time"], widths))
        print(_row(["-" * w for w in widths], widths), flush=True)
        for mutant in chosen:
            path = copy / mutant.path
            original = path.read_text("utf-8")
            path.write_text(mutated_text(mutant, original), "utf-8")
            try:
                outcome = run_tests(copy, mutant.tests, stop_first=True, timeout=args.timeout)
            finally:
                path.write_text(original, "utf-8")
            if outcome.status == "killed":
                verdict = outcome.killer
                killers.setdefault(outcome.killer, []).append(mutant.name)
            elif outcome.status == "timeout":
                verdict = f"TIMEOUT {outcome.killer}"
                failures.append(f"{mutant.name}: its tests reached no verdict")
            else:
                verdict = "SURVIVED" if outcome.status == "survived" else f"BROKEN {outcome.killer}"
                failures.append(f"{mutant.name}: {verdict.lower()}")
                if args.verbose or outcome.status == "broken":
                    print(outcome.output[-3000:], file=sys.stderr)
            cells = [mutant.name, mutant.guarantee, verdict, f"{outcome.seconds:.1f}s"]
            print(_row(cells, widths), flush=True)
        if killers:
            baseline = run_tests(copy, tuple(killers), stop_first=False, timeout=args.timeout)
            if baseline.status != "survived":
                failures.append(
                    "a test that killed a mutant fails without it too: "
                    + ", ".join(_FAILED.findall(baseline.output) or [baseline.killer])
                )
                print(baseline.output[-3000:], file=sys.stderr)
            print(
                f"\nbaseline: the {len(killers)} killing test(s) pass on the unmutated copy "
                f"({baseline.seconds:.1f}s)"
                if baseline.status == "survived"
                else "\nbaseline: FAILED"
            )
    killed = sum(len(names) for names in killers.values())
    print(f"\n{killed}/{len(chosen)} killed in {time.monotonic() - started:.0f}s")
    for failure in failures:
        print(f"  {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())

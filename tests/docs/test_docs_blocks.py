"""Every Python block of README.md and docs/*.md runs, and passes both strict type checkers.

How a block is marked, and what the names it assumes are, is in ``docs_blocks`` and
``docs_prelude``. Each runnable block runs as a script in a process of its own (a fork of
one that imported the heavy packages once: ``docs_forkserver``), in a fresh directory, with
the environment variables the docs read; blocks that need a server get the local one
(``tests/conftest.py``). All blocks,
fragments included, are type-checked in one ``mypy --strict`` run and one ``pyright
--strict`` run over a generated directory.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from docs_blocks import SERVICES, Block, blocks, free_names, module_source, write_modules

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ALL = blocks()
RUNNABLE = [block for block in ALL if block.kind == "run"]
# Third-party packages without type information; the project's mypy settings say the same.
_UNTYPED = ["aiokafka.*", "celery.*", "aiobotocore.*", "kombu.*"]

# What the docs read from the environment, as a reader would have set it.
ENVIRONMENT = {
    "WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "ERP_TOKEN": "erp-token-for-the-docs",
    "ERP_PASSWORD": "erp-password-for-the-docs",
    "OPS_TOKEN": "ops-token-for-the-docs",
    "CRON_SECRET": "cron-secret-for-the-docs",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    # docs/rest.md: the tokens the prelude's GitHub, Stripe and Slack look-alikes accept.
    "GITHUB_TOKEN": "gh-token-for-the-docs",
    "STRIPE_API_KEY": "sk_test_for_the_docs",
    "SLACK_TOKEN": "xoxb-token-for-the-docs",
}


def test_the_docs_have_python_blocks_and_every_marker_is_understood() -> None:
    assert len(ALL) >= 60
    assert all(block.kind in ("run", "fragment", "tested") for block in ALL)
    assert [b.name for b in ALL if b.kind == "fragment" and not b.note.strip()] == []
    assert [b.name for b in ALL for need in b.needs if need not in SERVICES] == []
    # Most blocks run; a fragment is the exception, with its reason.
    assert len(RUNNABLE) > 3 * len([b for b in ALL if b.kind == "fragment"])


def test_a_block_imports_only_what_it_leaves_undefined() -> None:
    block = Block("docs/x.md", 1, "await engine.trigger('orders')\nx = 1\nprint(x)\n", "run")
    assert free_names(block.code) == ["engine"]
    source = module_source(block)
    assert "from docs_prelude import engine\n" in source
    assert "async def _block() -> None:\n    await engine.trigger('orders')" in source


def _environment(block: Block, request: pytest.FixtureRequest) -> dict[str, str]:
    env = {**os.environ, **ENVIRONMENT}
    env.pop("DATABASE_URL", None)
    for need in block.needs:
        if need == "postgres":
            env["DATABASE_URL"] = request.getfixturevalue("docs_database")
        elif need == "redis":
            request.getfixturevalue("redis_url")
        elif need == "nats":
            request.getfixturevalue("nats_url")
        elif need == "rabbitmq":
            request.getfixturevalue("amqp_url")
        elif need == "sqs":
            env["AWS_ENDPOINT_URL_SQS"] = request.getfixturevalue("sqs_endpoint")
    return env


@pytest.fixture(scope="session")
def forkserver() -> Iterator[subprocess.Popen[str]]:
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("docs_forkserver.py"))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    yield server
    assert server.stdin is not None
    assert server.stdout is not None
    server.stdin.close()
    server.wait(timeout=30)
    server.stdout.close()


def run_script(server: subprocess.Popen[str], path: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run ``path`` as ``__main__`` in its directory: (exit code, what it wrote on stderr)."""
    assert server.stdin is not None
    assert server.stdout is not None
    stderr = path.with_suffix(".stderr")
    job = {
        "path": str(path),
        "cwd": str(path.parent),
        "env": env,
        "timeout": 30,
        "stderr": str(stderr),
    }
    server.stdin.write(json.dumps(job) + "\n")
    server.stdin.flush()
    answer = server.stdout.readline()
    assert answer, "the fork server died"
    return json.loads(answer)["returncode"], stderr.read_text(encoding="utf-8")


def test_the_fork_server_reports_failures_and_time_outs(
    forkserver: subprocess.Popen[str], tmp_path: Path
) -> None:
    (tmp_path / "fails.py").write_text(
        "import os, sys\nprint(os.environ['X'], file=sys.stderr)\nraise SystemExit(3)\n"
    )
    assert run_script(forkserver, tmp_path / "fails.py", {"X": "said so"}) == (3, "said so\n")
    (tmp_path / "raises.py").write_text("raise ValueError('no')\n")
    code, stderr = run_script(forkserver, tmp_path / "raises.py", {})
    assert (code, stderr.splitlines()[-1]) == (1, "ValueError: no")


@pytest.mark.parametrize("block", RUNNABLE, ids=[block.name for block in RUNNABLE])
def test_the_block_runs(
    block: Block,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    forkserver: subprocess.Popen[str],
) -> None:
    env = _environment(block, request)
    path = write_modules(tmp_path, [block])[block.name]
    returncode, stderr = run_script(forkserver, path, env)
    assert returncode == 0, f"{block.file}:{block.line}\n{stderr}"


def test_the_store_contract_example_certifies_a_store(tmp_path: Path) -> None:
    """docs/stores.md's test module, run by pytest as a user's suite would run it (``MyStore``
    is a ``MemoryStore`` of the reader's own package, see ``docs_blocks``)."""
    [block] = [b for b in ALL if b.kind == "tested" and b.note == "store-contract"]
    path = write_modules(tmp_path, [block])[block.name]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-o",
            "asyncio_mode=auto",
            "-o",
            "asyncio_default_fixture_loop_scope=function",
            "--rootdir",
            str(tmp_path),
            str(path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    summary = result.stdout.strip().splitlines()[-1]
    passed = re.match(r"(\d+) passed", summary)
    assert passed is not None, summary
    assert int(passed[1]) > 100, summary  # the whole contract, not an empty class


# --- types ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Block]]:
    directory = tmp_path_factory.mktemp("docs_blocks")
    write_modules(directory, ALL)
    overrides = "\n".join(
        f"[mypy-{module}]\nignore_missing_imports = True\n" for module in _UNTYPED
    )
    (directory / "mypy.ini").write_text(
        f"[mypy]\nstrict = True\npython_version = 3.11\n\n{overrides}", encoding="utf-8"
    )
    (directory / "pyrightconfig.json").write_text(
        json.dumps(
            {
                "venvPath": str(Path(sys.prefix).parent),
                "venv": Path(sys.prefix).name,
                "pythonVersion": "3.11",
                "typeCheckingMode": "strict",
            }
        ),
        encoding="utf-8",
    )
    return directory, {f"{block.name}.py": block for block in ALL}


def _where(blocks_by_file: dict[str, Block], file: str, line: int, message: str) -> str:
    block = blocks_by_file.get(Path(file).name)
    if block is None:
        return f"{Path(file).name}:{line}: {message}"
    return f"{block.file} (block at line {block.line}), generated line {line}: {message}"


@pytest.mark.slow
def test_every_block_passes_mypy_strict(generated: tuple[Path, dict[str, Block]]) -> None:
    directory, by_file = generated
    result = subprocess.run(
        [
            str(BIN / "mypy"),
            "--config-file",
            "mypy.ini",
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            *sorted(by_file),
        ],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [
        _where(by_file, m["file"], int(m["line"]), m["message"])
        for m in re.finditer(
            r"^(?P<file>[^:\n]+):(?P<line>\d+): error: (?P<message>.*)$", result.stdout, re.M
        )
    ]
    assert errors == [], "\n".join(errors)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_every_block_passes_pyright_strict(generated: tuple[Path, dict[str, Block]]) -> None:
    directory, by_file = generated
    result = subprocess.run(
        [str(BIN / "pyright"), "--outputjson", str(directory)],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = json.loads(result.stdout)
    errors = [
        _where(by_file, d["file"], d["range"]["start"]["line"] + 1, d["message"])
        for d in report["generalDiagnostics"]
        if d["severity"] == "error"
    ]
    assert errors == [], "\n".join(errors)
    assert report["summary"]["filesAnalyzed"] >= len(by_file)

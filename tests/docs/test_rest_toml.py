"""Every TOML file docs/rest.md shows loads with the loader ``watukuy run`` uses, and builds
an engine; the mistake the page shows is what the command prints, and its exit status.

Each ```` ```toml ```` block of the page is a whole file (its pollers and a sink), so it is
loaded as one, with the environment variables the page tells the reader to set.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import watukuy as wk
from watukuy import rest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "rest.md"
EXAMPLES = sorted((ROOT / "examples").glob("*.toml"))
WATUKUY = Path(sys.executable).with_name("watukuy")
_TOML = re.compile(r"^```toml\n(?P<code>.*?)^```", re.S | re.M)
_MISTAKE = re.compile(r"^\$ watukuy run pollers\.toml\n(?P<message>.+?)\n", re.M)

# What the page asks the reader to set.
ENVIRONMENT = {
    "GITHUB_REPO": "octo-org/hello-world",
    "GITHUB_TOKEN": "gh-token-for-the-docs",
    "STRIPE_API_KEY": "sk_test_for_the_docs",
    "SLACK_TOKEN": "xoxb-token-for-the-docs",
    "CARRIER_CLIENT_ID": "carrier-client",
    "CARRIER_CLIENT_SECRET": "carrier-secret-for-the-docs",
}


def _blocks() -> list[tuple[int, str]]:
    text = PAGE.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, match.start()) + 1, match["code"]) for match in _TOML.finditer(text)
    ]


BLOCKS = _blocks()


def test_the_page_has_a_file_for_each_example() -> None:
    assert len(BLOCKS) >= 12


@pytest.mark.parametrize(("line", "code"), BLOCKS, ids=[f"rest_md_L{line}" for line, _ in BLOCKS])
def test_the_block_loads_and_builds_an_engine(line: int, code: str, tmp_path: Path) -> None:
    path = tmp_path / "pollers.toml"
    path.write_text(code, encoding="utf-8")
    config = rest.load_config(path, env=ENVIRONMENT)
    engine = config.build_engine(store=wk.MemoryStore())
    assert isinstance(engine, wk.Engine)


@pytest.mark.parametrize("path", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_the_example_loads(path: Path) -> None:
    config = rest.load_config(path, env=ENVIRONMENT)
    assert isinstance(config.build_engine(store=wk.MemoryStore()), wk.Engine)


def test_the_mistake_the_page_shows_is_what_the_command_prints(tmp_path: Path) -> None:
    match = _MISTAKE.search(PAGE.read_text(encoding="utf-8"))
    assert match is not None
    (tmp_path / "pollers.toml").write_text(
        '[pollers.issues]\nurl = "https://api.github.com/repos/octo-org/hello-world/issues"\n'
        'identity = "id"\npaginator = { type = "link_header", rell = "next" }\n\n'
        '[sinks.out]\ntype = "stdout"\n',
        encoding="utf-8",
    )
    result = subprocess.run(
        [str(WATUKUY), "run", "pollers.toml", "--store", "memory://"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stderr.strip()) == (2, match["message"])
    with pytest.raises(wk.ConfigError) as raised:
        rest.load_config(tmp_path / "pollers.toml")
    assert match["message"].endswith(str(raised.value).removeprefix(str(tmp_path) + "/"))

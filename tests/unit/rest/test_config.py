"""Pollers described in a TOML file: interpolation, every kind of mistake, and a valid file
built into an engine."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

import watukuy as wk
from watukuy import rest
from watukuy.rest._config_sinks import read_sink
from watukuy.rest._interpolate import Interpolated, InterpolationError, interpolate
from watukuy.rest._toml_tables import Source

# A poller table that is never reached: the mistakes below are all found before it is built.
POLLER = """
[pollers.issues]
url = "https://api.example.com/issues"
identity = "id"
"""

SINK = """
[sinks.out]
type = "stdout"
"""


def write(tmp_path: Path, text: str, name: str = "pollers.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def config_error(path: Path, env: dict[str, str] | None = None) -> wk.ConfigError:
    with pytest.raises(wk.ConfigError) as caught:
        rest.load_config(path, env=env or {})
    message = caught.value.message
    assert "\n" not in message
    return caught.value


# --- interpolation --------------------------------------------------------------------------


def test_variables_defaults_and_dollars_are_resolved() -> None:
    env = {"HOST": "api.example.com", "EMPTY": "", "TOKEN": "s3cret-token"}
    document: dict[str, Any] = {
        "a": "https://${HOST}/x",
        "b": "${MISSING:-fallback}",
        "c": "${EMPTY:-used when empty}",
        "d": "costs $$5 and $HOST stays",
        "e": ["${TOKEN}", 3, {"f": "${HOST:-unused}"}],
        "g": "${MISSING:-}",
    }
    seen: list[str] = []
    result = interpolate(document, env, on_value=seen.append)
    assert result == {
        "a": "https://api.example.com/x",
        "b": "fallback",
        "c": "used when empty",
        "d": "costs $5 and $HOST stays",
        "e": ["s3cret-token", 3, {"f": "api.example.com"}],
        "g": "",
    }
    assert isinstance(result["a"], Interpolated)
    assert not isinstance(result["b"], Interpolated)
    assert not isinstance(result["d"], Interpolated)
    assert sorted(seen) == ["api.example.com", "api.example.com", "s3cret-token"]


def test_an_empty_variable_without_a_default_is_empty() -> None:
    assert interpolate({"a": "x${EMPTY}y"}, {"EMPTY": ""}) == {"a": "xy"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${UNSET}", "the environment variable UNSET is not set"),
        ("abc ${OPEN", "an unclosed '${'"),
        ("${not a name}", "the reference '${not a name}' is not one"),
        ("${A:-${B}}", "nested references are not supported"),
    ],
)
def test_bad_references_name_the_value_path(text: str, expected: str) -> None:
    with pytest.raises(InterpolationError) as caught:
        interpolate({"t": {"k": ["x", text]}}, {})
    assert caught.value.path == ("t", "k", 1)
    assert expected in caught.value.message


def test_an_unset_variable_names_file_table_key_and_variable(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        POLLER.replace('"https://api.example.com/issues"', '"${API}/repos/${REPO}/issues"'),
    )
    error = config_error(path, {"API": "https://api.example.com"})
    assert error.message == (
        f"{path}: [pollers.issues] url: the environment variable REPO is not set (set "
        "it, or write a default after ':-' inside the braces)"
    )
    assert error.field == "pollers.issues.url"


def test_a_number_from_the_environment_is_read_as_a_number(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [budgets.api]
        requests = "${RATE}"
        per = "${WINDOW:-1h}"
        """
        + POLLER
        + 'budget = "api"\n'
        + SINK,
    )
    # The budgets are read before the pollers: a bad one is found without building these.
    error = config_error(path, {"RATE": "many"})
    assert error.message == (
        f"{path}: [budgets.api] requests: expected an integer, got a string (taken "
        "from the environment; its value is not shown)"
    )


# --- mistakes -------------------------------------------------------------------------------


def test_a_toml_syntax_error_names_the_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, '[engine]\nstore = "sqlite:///x.db"\nsource_prefix = nope\n')
    error = config_error(path)
    assert error.message.startswith(f"{path}: line 3, column 17: invalid TOML: ")


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    error = config_error(tmp_path / "absent.toml")
    assert error.message.startswith(f"{tmp_path / 'absent.toml'}: cannot read the file: ")


def test_an_unknown_table_gets_a_suggestion(tmp_path: Path) -> None:
    error = config_error(write(tmp_path, POLLER + SINK + "[budget.x]\nrequests = 1\n"))
    assert error.message.endswith(": unknown key 'budget' (did you mean 'budgets'?)")
    assert error.field == "budget"


def test_a_file_without_pollers(tmp_path: Path) -> None:
    path = write(tmp_path, SINK)
    assert config_error(path).message == f"{path}: missing required key 'pollers'"
    path = write(tmp_path, "[pollers]\n" + SINK)
    assert config_error(path).message == (
        f"{path}: [pollers] no poller is described: add a [pollers.NAME] table"
    )


def test_an_unknown_engine_key_gets_a_suggestion(tmp_path: Path) -> None:
    path = write(tmp_path, '[engine]\nstore = "memory://"\nsource_prefx = "x"\n' + POLLER + SINK)
    error = config_error(path)
    assert error.message == (
        f"{path}: [engine] unknown key 'source_prefx' (did you mean 'source_prefix'?)"
    )
    assert error.field == "engine.source_prefx"


def test_a_wrong_type_names_what_was_expected(tmp_path: Path) -> None:
    path = write(tmp_path, "[engine]\ntick_concurrency = '4'\n" + POLLER + SINK)
    assert config_error(path).message == (
        f"{path}: [engine] tick_concurrency: expected an integer, got a string"
    )
    path = write(tmp_path, "[engine]\nredact = ['authorization', 3]\n" + POLLER + SINK)
    assert config_error(path).message == (
        f"{path}: [engine] redact[1]: expected a string, got an integer"
    )


def test_a_nested_option_table_is_checked_key_by_key(tmp_path: Path) -> None:
    path = write(tmp_path, "[engine.lease]\nttl = '30s'\nrenew_evry = '5s'\n" + POLLER + SINK)
    assert config_error(path).message == (
        f"{path}: [engine.lease] unknown key 'renew_evry' (did you mean 'renew_every'?)"
    )


def test_a_budget_mistake_found_by_budget_itself_gains_the_file_and_table(tmp_path: Path) -> None:
    path = write(tmp_path, "[budgets.github]\nrequests = 5000\nper = '0s'\n" + POLLER + SINK)
    assert config_error(path).message == (
        f"{path}: [budgets.github] per: must be greater than zero, got '0s'"
    )
    path = write(tmp_path, "[budgets.github]\nrequests = 5000\n" + POLLER + SINK)
    assert config_error(path).message == (f"{path}: [budgets.github] missing required key 'per'")
    path = write(
        tmp_path,
        "[budgets.github]\nrequests = 5\nper = '1h'\nfairnes = 'weighted'\n" + POLLER + SINK,
    )
    assert config_error(path).message == (
        f"{path}: [budgets.github] unknown key 'fairnes' (did you mean 'fairness'?)"
    )


def test_an_unknown_sink_type_gets_a_suggestion(tmp_path: Path) -> None:
    path = write(tmp_path, POLLER + "[sinks.out]\ntype = 'stdot'\n")
    assert config_error(path).message == (
        f"{path}: [sinks.out] type: expected one of 'stdout', 'jsonl', 'webhook', "
        "'handler' (did you mean 'stdout'?)"
    )


def test_a_sink_key_of_another_type_is_unknown(tmp_path: Path) -> None:
    path = write(tmp_path, POLLER + "[sinks.out]\ntype = 'jsonl'\npth = 'events.jsonl'\n")
    assert config_error(path).message == (
        f"{path}: [sinks.out] unknown key 'pth' (did you mean 'path'?)"
    )
    path = write(tmp_path, POLLER + "[sinks.out]\ntype = 'webhook'\nurl = 'https://h.example'\n")
    assert config_error(path).message == f"{path}: [sinks.out] missing required key 'secret'"


def test_a_sink_naming_an_unknown_poller(tmp_path: Path) -> None:
    path = write(tmp_path, POLLER + "[sinks.out]\ntype = 'stdout'\npollers = ['isues']\n")
    error = config_error(path)
    assert error.message == (
        f"{path}: [sinks.out] pollers[0]: there is no [pollers.isues] table "
        "(did you mean 'issues'?)"
    )
    assert error.field == "sinks.out.pollers[0]"


def test_a_poller_no_sink_takes_is_a_mistake(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        POLLER
        + "[pollers.other]\nurl = 'https://x.example'\nidentity = 'id'\n"
        + "[sinks.out]\ntype = 'stdout'\npollers = ['other']\n",
    )
    error = config_error(path)
    assert error.message.startswith(f"{path}: [pollers.issues] no sink takes this poller's events")
    # A caller that attaches handlers of its own says so.
    config = rest.load_config(path, env={}, require_sinks=False)
    assert list(config.pollers) == ["issues", "other"]
    assert config.sinks["out"].pollers == ["other"]


def test_a_handler_that_cannot_be_imported(tmp_path: Path) -> None:
    path = write(tmp_path, POLLER + "[sinks.out]\ntype = 'handler'\nhandler = 'nowhere_x:handle'\n")
    assert config_error(path).message == (
        f"{path}: [sinks.out] handler: cannot import 'nowhere_x': "
        "ModuleNotFoundError: No module named 'nowhere_x'"
    )
    (tmp_path / "myhandlers.py").write_text("def handle(event, ctx):\n    pass\n")
    path = write(
        tmp_path, POLLER + "[sinks.out]\ntype = 'handler'\nhandler = 'myhandlers:handel'\n"
    )
    assert config_error(path).message == (
        f"{path}: [sinks.out] handler: module 'myhandlers' has no attribute 'handel'"
    )
    path = write(tmp_path, POLLER + "[sinks.out]\ntype = 'handler'\nhandler = 'myhandlers'\n")
    assert config_error(path).message == (
        f"{path}: [sinks.out] handler: expected 'package.module:name', got 'myhandlers'"
    )


def test_a_sink_name_must_be_a_consumer_name(tmp_path: Path) -> None:
    path = write(tmp_path, POLLER + '[sinks."to disk"]\ntype = "stdout"\n')
    error = config_error(path)
    assert error.message.startswith(
        f'{path}: [sinks."to disk"] the sink\'s name is its consumer name: '
    )


def test_a_secret_from_the_environment_never_appears_in_a_message(tmp_path: Path) -> None:
    secret = "whsec-not-to-be-printed"
    path = write(
        tmp_path,
        POLLER + "[sinks.out]\ntype = 'webhook'\nurl = '${HOOK_URL}'\nsecret = '${HOOK_SECRET}'\n",
    )
    error = config_error(path, {"HOOK_URL": f"ftp://{secret}.example", "HOOK_SECRET": secret})
    assert error.message.startswith(f"{path}: [sinks.out] ")
    assert secret not in error.message
    assert "***" in error.message


def test_dotted_table_names_are_quoted(tmp_path: Path) -> None:
    path = write(
        tmp_path, '[budgets."github.com"]\nrequests = 1\nper = "1h"\nburts = 2\n' + POLLER + SINK
    )
    assert config_error(path).message == (
        f"{path}: [budgets.\"github.com\"] unknown key 'burts' (did you mean 'burst'?)"
    )


# --- sinks and the engine, with a poller written in Python ----------------------------------


def handwritten(name: str) -> wk.PollerDefinition[Any]:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(items=[{"id": 1, "title": "one"}, {"id": 2, "title": "two"}])

    return wk.define_poller(
        name=name,
        identity=lambda item: item["id"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
        budget="api",
    )


async def test_the_sinks_of_a_config_get_every_event_as_a_cloudevent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = Source("pollers.toml", str(tmp_path))
    events = tmp_path / "events.jsonl"
    sinks = {
        "file": read_sink(source, ("sinks", "file"), {"type": "jsonl", "path": str(events)}),
        "out": read_sink(source, ("sinks", "out"), {"type": "stdout", "pollers": ["issues"]}),
    }
    config = rest.Config(
        path="pollers.toml",
        store="memory://",
        engine_options={"source_prefix": "https://example.test/watukuy"},
        budgets={"api": wk.Budget(10, "1s")},
        pollers={"issues": handwritten("issues"), "users": handwritten("users")},
        sinks=sinks,
    )
    engine = config.build_engine()
    try:
        await engine.tick()
        await engine.tick()  # what the first pass left pending is delivered
    finally:
        await engine.stop()
        await config.aclose()
    written = [json.loads(line) for line in events.read_text("utf-8").splitlines()]
    assert sorted((e["type"], e["subject"]) for e in written) == [
        ("issues.created", "1"),
        ("issues.created", "2"),
        ("users.created", "1"),
        ("users.created", "2"),
    ]
    assert all(e["specversion"] == "1.0" for e in written)
    assert all(e["source"].startswith("https://example.test/watukuy") for e in written)
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(e["subject"] for e in printed) == ["1", "2"]
    assert {e["watukuypoller"] for e in printed} == {"issues"}


def test_build_engine_needs_a_store(tmp_path: Path) -> None:
    config = rest.Config(path="pollers.toml", store=None, pollers={})
    with pytest.raises(wk.ConfigError) as caught:
        config.build_engine()
    assert caught.value.message == (
        "pollers.toml: [engine] missing required key 'store' (or pass a store, --store on "
        "the command line)"
    )
    config = rest.Config(path="pollers.toml", store="mysql://x", pollers={})
    with pytest.raises(wk.ConfigError) as caught:
        config.build_engine()
    assert caught.value.message.startswith("pollers.toml: [engine] store: ")
    config = rest.Config(
        path="pollers.toml",
        store="mysql://x",
        budgets={"api": wk.Budget(10, "1s")},
        pollers={"issues": handwritten("issues")},
    )
    # The store given wins over the file's (--store on the command line).
    assert isinstance(config.build_engine(store="memory://").store, wk.MemoryStore)


# --- pollers ---------------------------------------------------------------------------------

FULL = """
[engine]
store = "memory://"
source_prefix = "https://example.test/watukuy"
tick_concurrency = 2

[budgets.github]
requests = 5000
per = "1h"

[pollers.issues]
url = "${API:-https://api.example.com}/repos/${REPO}/issues"
params = { state = "all", per_page = 100 }
headers = { Accept = "application/vnd.github+json" }
items = "."
identity = "id"
version = "updated_at"
paginator = { type = "link_header" }
mode = "token"
auth = { type = "bearer", token = "${TOKEN}" }
schedule = { min = "1m", max = "15m", backoff = { base = "2s" } }
budget = "github"
max_pages_per_cycle = "${MAX_PAGES}"
delivery = { concurrency = 4, retry = { attempts = 3 } }
retain = "payload"

[pollers.issues.reconcile]
every = "6h"
params = { state = "all", per_page = 50 }

[pollers.orders]
url = "https://shop.example.com/{partition}/orders"
identity = "id"
paginator = "page_number"
partitions = ["acme", "globex"]

[pollers.users]
url = "https://{partition.host}/graphql"
method = "POST"
json = { query = "{ users { id } }" }
items = "data.users"
identity = "id"
partitions = { acme = { host = "acme.example.com" } }
transform = "confighooks:shape"
auth = { type = "api_key", name = "X-Api-Key", value = { env = "KEY_{partition}" } }

[sinks.out]
type = "stdout"
pollers = ["issues", "users"]

[sinks.hook]
type = "webhook"
url = "https://hooks.example.com/in"
secret = "${HOOK_SECRET}"
pollers = ["orders"]
"""

ENV = {"REPO": "octo/cat", "TOKEN": "ghp-secret-token", "MAX_PAGES": "10", "HOOK_SECRET": "whsec"}


@pytest.fixture
def hooks(tmp_path: Path) -> Path:
    (tmp_path / "confighooks.py").write_text("def shape(item):\n    return item\n", "utf-8")
    return tmp_path


async def test_a_full_file_builds_the_engine_it_describes(hooks: Path) -> None:
    config = rest.load_config(write(hooks, FULL), env=ENV)
    assert list(config.pollers) == ["issues", "orders", "users"]
    assert config.store == "memory://"
    assert config.engine_options == {
        "source_prefix": "https://example.test/watukuy",
        "tick_concurrency": 2,
    }
    assert config.budgets == {"github": wk.Budget(5000, "1h")}
    issues = config.pollers["issues"]
    assert issues.budget == "github"
    assert issues.max_pages_per_cycle == 10
    assert issues.schedule.min_ms == 60_000
    assert issues.schedule.backoff.base == "2s"
    assert issues.delivery.concurrency == 4
    assert issues.delivery.retry.attempts == 3
    assert issues.retain == "payload"
    assert issues.reconcile is not None
    assert issues.reconcile.every_ms == 6 * 3600 * 1000
    orders = config.pollers["orders"]
    assert orders.partitions is not None
    assert list(orders.partitions()) == ["acme", "globex"]  # type: ignore[arg-type]
    users = config.pollers["users"]
    assert users.partitions is not None
    [acme] = users.partitions()  # type: ignore[misc]
    assert acme == wk.Partition("acme", {"host": "acme.example.com"})
    assert config.sinks["out"].pollers == ["issues", "users"]
    assert config.sinks["hook"].pollers == ["orders"]
    assert repr(config) == (
        f"Config({str(hooks / 'pollers.toml')!r}, store='memory://', pollers=['issues', "
        "'orders', 'users'], budgets=['github'], sinks=['out', 'hook'])"
    )
    secret_store = rest.Config(path="p.toml", store="postgresql://app:hunter22@db/app")
    assert "hunter22" not in repr(secret_store)
    engine = config.build_engine()
    try:
        assert sorted(engine.pollers) == ["issues", "orders", "users"]
    finally:
        await config.aclose()


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (
            'paginator = { type = "link_header" }',
            'paginator = { type = "link_header", rell = "next" }',
            "[pollers.issues.paginator] unknown key 'rell' (did you mean 'rel'?)",
        ),
        (
            'paginator = { type = "link_header" }',
            'paginator = { type = "link_headr" }',
            "[pollers.issues.paginator] type: unknown paginator type 'link_headr' (did you "
            "mean 'link_header'?); the types are cursor, keyset, link_header, next_url, "
            "offset, page_number, starting_after, or 'package.module:Class'",
        ),
        (
            'auth = { type = "bearer", token = "${TOKEN}" }',
            'auth = { type = "bearer", tokn = "${TOKEN}" }',
            "[pollers.issues.auth] unknown key 'tokn' (did you mean 'token'?)",
        ),
        (
            'auth = { type = "bearer", token = "${TOKEN}" }',
            'auth = { type = "baerer", token = "${TOKEN}" }',
            "[pollers.issues.auth] type: unknown auth type 'baerer' (did you mean 'bearer'?); "
            "the types are api_key, basic, bearer, oauth2_client_credentials, or "
            "'package.module:Class'",
        ),
        (
            'value = { env = "KEY_{partition}" }',
            'value = { evn = "KEY_{partition}" }',
            "[pollers.users.auth.value] unknown key 'evn' (did you mean 'env'?)",
        ),
        (
            'version = "updated_at"',
            'verison = "updated_at"',
            "[pollers.issues] unknown key 'verison' (did you mean 'version'?)",
        ),
        (
            'budget = "github"',
            'budget = "githb"',
            "[pollers.issues] budget: there is no [budgets.githb] table (did you mean 'github'?)",
        ),
        (
            'transform = "confighooks:shape"',
            'transform = "confighooks:shap"',
            "[pollers.users] transform: module 'confighooks' has no attribute 'shap'",
        ),
        (
            'schedule = { min = "1m", max = "15m", backoff = { base = "2s" } }',
            'schedule = { min = "1m", max = "15m", backoff = { bsae = "2s" } }',
            "[pollers.issues.schedule.backoff] unknown key 'bsae' (did you mean 'base'?)",
        ),
        (
            'schedule = { min = "1m", max = "15m", backoff = { base = "2s" } }',
            'schedule = { min = "1m", max = "1s" }',
            "[pollers.issues.schedule] max: must be at least schedule.min ('1m'), got '1s'",
        ),
        (
            'retain = "payload"',
            'retain = "payloads"',
            "[pollers.issues] retain: expected one of 'hash', 'payload' (did you mean 'payload'?)",
        ),
        (
            'identity = "id"\nversion',
            "identity = 7\nversion",
            "[pollers.issues] identity: expected a string, got an integer",
        ),
        (
            'partitions = ["acme", "globex"]',
            "partitions = 3",
            "[pollers.orders] partitions: expected an array of keys, a table of key -> data, "
            "or 'package.module:function', got an integer",
        ),
    ],
)
def test_every_poller_mistake_names_its_table_and_key(
    hooks: Path, before: str, after: str, expected: str
) -> None:
    assert before in FULL
    path = write(hooks, FULL.replace(before, after, 1))
    error = config_error(path, ENV)
    assert error.message == f"{path}: {expected}"
    assert "ghp-secret-token" not in error.message


def test_a_mistake_found_by_a_description_gains_the_file_and_table(hooks: Path) -> None:
    path = write(hooks, FULL.replace('method = "POST"', 'method = "FETCH"'))
    message = config_error(path, ENV).message
    assert message.startswith(f"{path}: [pollers.users] method: expected one of ")


def test_python_escape_hatches(hooks: Path) -> None:
    (hooks / "escapehooks.py").write_text(
        textwrap.dedent(
            """
            import watukuy as wk
            from watukuy.rest._paginate import PageNumber as Pages

            def shape(item):
                return item

            def tenants():
                return [wk.Partition("acme", {"host": "acme.example.com"})]
            """
        ),
        "utf-8",
    )
    text = FULL.replace('transform = "confighooks:shape"', 'transform = "escapehooks:shape"')
    text = text.replace(
        'paginator = "page_number"', 'paginator = { type = "escapehooks:Pages", size = 10 }'
    )
    text = text.replace(
        'partitions = { acme = { host = "acme.example.com" } }',
        'partitions = "escapehooks:tenants"',
    )
    config = rest.load_config(write(hooks, text), env=ENV)
    partitions = config.pollers["users"].partitions
    assert partitions is not None
    assert [p.key for p in partitions()] == ["acme"]  # type: ignore[union-attr]
    path = write(hooks, text.replace("size = 10", "sise = 10"))
    assert config_error(path, ENV).message == (
        f"{path}: [pollers.orders.paginator] unknown key 'sise' (did you mean 'size'?)"
    )
    path = write(hooks, text.replace("escapehooks:Pages", "escapehooks:Pagez"))
    assert config_error(path, ENV).message == (
        f"{path}: [pollers.orders.paginator] type: module 'escapehooks' has no attribute 'Pagez'"
    )


def test_an_oauth2_auth_takes_its_secret_from_the_environment_and_extra_as_data(
    tmp_path: Path,
) -> None:
    pytest.importorskip("authlib")
    path = write(
        tmp_path,
        POLLER
        + """
        auth = { type = "oauth2_client_credentials", token_url = "https://id.example/token", client_id = "app", client_secret = { env = "CLIENT_SECRET" }, extra = { resource = "api" } }
        """
        + SINK,
    )
    config = rest.load_config(path, env={})
    assert list(config.pollers) == ["issues"]
    path = write(
        tmp_path, textwrap.dedent(path.read_text("utf-8")).replace("client_id", "clientid")
    )
    assert config_error(path).message == (
        f"{path}: [pollers.issues.auth] unknown key 'clientid' (did you mean 'client_id'?)"
    )


def test_a_mistake_only_the_engine_sees_still_names_the_file(tmp_path: Path) -> None:
    budget = "[budgets.api]\nrequests = 10\nper = '1s'\n"
    path = write(tmp_path, budget + POLLER + 'budget = "api"\nbudget_cost = 11\n' + SINK)
    config = rest.load_config(path, env={})
    with pytest.raises(wk.ConfigError) as caught:
        config.build_engine(store="memory://")
    assert caught.value.message == (
        f"{path}: budget_cost: poller 'issues' has budget_cost 11, which budget 'api' (a "
        "budget of 10 requests per window) can never grant"
    )


def test_a_bad_environment_variable_name_in_an_auth_table_names_file_and_table(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path,
        POLLER + "auth = { type = 'bearer', token = { env = 'A B' } }\n" + SINK,
    )
    message = config_error(path).message
    assert message.startswith(f"{path}: [pollers.issues.auth] token.env: "), message
    assert "'A B'" in message


def test_false_turns_off_an_optional_paginator_name(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        POLLER
        + "[pollers.issues.paginator]\ntype = 'keyset'\nsince_param = 'since'\n"
        + "tie_break = false\nafter_param = false\n"
        + SINK,
    )
    (poller,) = rest.load_config(path, env={}).pollers.values()
    assert isinstance(poller.cursor, wk.TimestampCursor)
    assert poller.cursor.tie_break is None
    path = write(
        tmp_path, POLLER + "[pollers.issues.paginator]\ntype = 'keyset'\nlimit = false\n" + SINK
    )
    assert config_error(path).message.startswith(f"{path}: [pollers.issues.paginator] limit")

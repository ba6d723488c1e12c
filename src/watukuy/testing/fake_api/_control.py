"""The control API of a served fake: drive the dataset and knobs from another process.

Every action lives at ``{url}/_control/<action>``; ``POST`` actions take a JSON object,
``GET`` actions take query parameters, and every answer is JSON. Bad arguments are ``400``,
an unknown item or tenant is ``404``, both as Problem Details. Control requests are not
counted, logged, delayed, faulted or rate limited.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from watukuy.model import json as wkjson
from watukuy.model.errors import ConfigError

from ._protocol import Request, Response, json_response, problem_response

if TYPE_CHECKING:
    from ._api import FakeApi

__all__ = ["CONTROL_ACTIONS", "handle_control"]

_Action = Callable[["FakeApi", dict[str, Any]], Any]


def _take(args: dict[str, Any], allowed: set[str]) -> dict[str, Any]:
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise ConfigError(f"unknown argument(s) {', '.join(unknown)}", field=unknown[0])
    return args


def _tenant_name(args: Mapping[str, Any]) -> str:
    name = args.get("tenant", "")
    if not isinstance(name, str):
        raise ConfigError(f"expected a string, got {name!r}", field="tenant")
    return name


def _existing(api: FakeApi, args: Mapping[str, Any]) -> str:
    name = _tenant_name(args)
    if name not in api.tenants():
        raise LookupError(f"unknown tenant {name!r}")
    return name


def _required(args: Mapping[str, Any], name: str) -> Any:
    if name not in args:
        raise ConfigError("is required", field=name)
    return args[name]


def _add(api: FakeApi, args: dict[str, Any]) -> Any:
    _take(args, {"tenant", "item"})
    return api.tenant(_tenant_name(args)).add(_required(args, "item"))


def _update(api: FakeApi, args: dict[str, Any]) -> Any:
    _take(args, {"tenant", "id", "changes"})
    changes = args.get("changes") or {}
    if not isinstance(changes, dict):
        raise ConfigError(f"expected an object, got {changes!r}", field="changes")
    return api.tenant(_tenant_name(args)).update(str(_required(args, "id")), **changes)


def _remove(api: FakeApi, args: dict[str, Any]) -> Any:
    _take(args, {"tenant", "id"})
    return {"removed": api.tenant(_tenant_name(args)).remove(str(_required(args, "id")))}


def _seed(api: FakeApi, args: dict[str, Any]) -> Any:
    _take(args, {"tenant", "items"})
    items = _required(args, "items")
    if not isinstance(items, list):
        raise ConfigError(f"expected a list, got {items!r}", field="items")
    tenant = api.tenant(_tenant_name(args))
    tenant.seed(items)
    return {"size": tenant.size()}


def _clear(api: FakeApi, args: dict[str, Any]) -> Any:
    _take(args, {"tenant"})
    api.tenant(_tenant_name(args)).clear()
    return {"size": 0}


def _items(api: FakeApi, args: dict[str, Any]) -> Any:
    _take(args, {"tenant"})
    return {"data": api.tenant(_existing(api, args)).all()}


def _item(api: FakeApi, args: dict[str, Any]) -> Any:
    _take(args, {"tenant", "id"})
    identity = str(_required(args, "id"))
    item = api.tenant(_existing(api, args)).get(identity)
    if item is None:
        raise KeyError(identity)
    return item


def _size(api: FakeApi, args: dict[str, Any]) -> Any:
    _take(args, {"tenant"})
    return {"size": api.tenant(_existing(api, args)).size()}


def _tenants(api: FakeApi, args: dict[str, Any]) -> Any:
    _take(args, set())
    return {"tenants": api.tenants()}


def _fail_next(api: FakeApi, args: dict[str, Any]) -> Any:
    _take(args, {"status", "times", "retry_after", "problem", "body", "headers", "path"})
    api.fail_next(**args)
    return {"pending_faults": api.pending_faults()}


def _clear_faults(api: FakeApi, args: dict[str, Any]) -> Any:
    _take(args, set())
    api.clear_faults()
    return {"pending_faults": 0}


def _set_latency(api: FakeApi, args: dict[str, Any]) -> Any:
    _take(args, {"latency"})
    api.set_latency(_required(args, "latency"))
    return {"latency_ms": api.latency_ms}


def _set_rate_limit(api: FakeApi, args: dict[str, Any]) -> Any:
    _take(args, {"style", "limit", "window", "reset", "reset_after", "per"})
    api.set_rate_limit(**args)
    return {"ok": True}


def _set_flag(method: str) -> _Action:
    def action(api: FakeApi, args: dict[str, Any]) -> Any:
        _take(args, {"enabled"})
        enabled = args.get("enabled", True)
        if not isinstance(enabled, bool):
            raise ConfigError(f"expected true or false, got {enabled!r}", field="enabled")
        getattr(api, method)(enabled)
        return {"enabled": enabled}

    return action


def _reset_stats(api: FakeApi, args: dict[str, Any]) -> Any:
    _take(args, set())
    api.reset_stats()
    return {"calls": 0}


def _query_int(args: Mapping[str, Any], name: str, default: int | None) -> int | None:
    raw = args.get(name)
    if raw in (None, ""):
        return default
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"expected an integer, got {raw!r}", field=name) from None


def _log(api: FakeApi, args: dict[str, Any]) -> Any:
    _take(args, {"after", "limit"})
    after = _query_int(args, "after", 0) or 0
    records = api.log_after(after, _query_int(args, "limit", None))
    return {"entries": [record.to_dict() for record in records], "last_seq": api.last_seq}


def _stats(api: FakeApi, args: dict[str, Any]) -> Any:
    _take(args, set())
    names = api.tenants()
    return {
        "calls": api.calls,
        "pending_faults": api.pending_faults(),
        "last_seq": api.last_seq,
        "log_size": len(api.log),
        "latency_ms": api.latency_ms,
        "tenants": len(names),
        "items": sum(api.tenant(name).size() for name in names),
    }


CONTROL_ACTIONS: Final[dict[str, tuple[str, _Action]]] = {
    "add": ("POST", _add),
    "update": ("POST", _update),
    "remove": ("POST", _remove),
    "seed": ("POST", _seed),
    "clear": ("POST", _clear),
    "fail_next": ("POST", _fail_next),
    "clear_faults": ("POST", _clear_faults),
    "set_latency": ("POST", _set_latency),
    "set_rate_limit": ("POST", _set_rate_limit),
    "set_etags": ("POST", _set_flag("set_etags")),
    "set_last_modified": ("POST", _set_flag("set_last_modified")),
    "reset_stats": ("POST", _reset_stats),
    "items": ("GET", _items),
    "item": ("GET", _item),
    "size": ("GET", _size),
    "tenants": ("GET", _tenants),
    "log": ("GET", _log),
    "stats": ("GET", _stats),
}
"""Action name -> (HTTP method, handler)."""


def handle_control(api: FakeApi, request: Request) -> Response:
    """Answer a ``/_control/<action>`` request."""
    action = request.segments[1] if len(request.segments) == 2 else ""
    spec = CONTROL_ACTIONS.get(action)
    if spec is None:
        return problem_response(404, f"no control action {request.path}")
    method, run = spec
    if request.method != method:
        denied = problem_response(405, f"{request.path} only answers {method}")
        denied.headers.append(("allow", method))
        return denied
    try:
        if method == "GET":
            args: Any = dict(request.query)
        else:
            args = wkjson.loads(request.body) if request.body.strip() else {}
        if not isinstance(args, dict):
            raise ConfigError(f"expected a JSON object, got {args!r}", field="body")
        return json_response(200, run(api, args))
    except ConfigError as error:
        return problem_response(400, error.message)
    except KeyError as error:
        return problem_response(404, f"no item {error.args[0]!r}")
    except LookupError as error:
        return problem_response(404, str(error))
    except (TypeError, ValueError) as error:
        return problem_response(400, str(error))

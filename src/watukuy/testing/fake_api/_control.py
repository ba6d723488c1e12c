"""The control API of a served fake: drive the dataset and knobs from another process.

Every action lives at ``{url}/_control/<action>``; ``POST`` actions take a JSON object,
``GET`` actions take query parameters, and every answer is JSON. Bad arguments are ``400``,
an unknown item or tenant is ``404``, both as Problem Details. Control requests are not
counted, logged, delayed, faulted or rate limited.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from watukuy.model import json as wkjson
from watukuy.model.errors import ConfigError

from ._items import Dataset
from ._protocol import Request, Response, json_response, problem_response
from ._vendor import Vendor

__all__ = ["CONTROL_ACTIONS", "handle_control"]

_Action = Callable[[Vendor, dict[str, Any]], Any]


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


def _opened(vendor: Vendor, args: Mapping[str, Any]) -> Dataset:
    """The addressed tenant's dataset, created empty on first use."""
    return vendor._open(_tenant_name(args))


def _existing(vendor: Vendor, args: Mapping[str, Any]) -> Dataset:
    """The addressed tenant's dataset; ``LookupError`` for an unknown tenant."""
    name = _tenant_name(args)
    if name not in vendor.tenants():
        raise LookupError(f"unknown tenant {name!r}")
    return vendor._dataset(name)


def _required(args: Mapping[str, Any], name: str) -> Any:
    if name not in args:
        raise ConfigError("is required", field=name)
    return args[name]


def _add(vendor: Vendor, args: dict[str, Any]) -> Any:
    _take(args, {"tenant", "item"})
    return _opened(vendor, args).add(_required(args, "item"))


def _update(vendor: Vendor, args: dict[str, Any]) -> Any:
    _take(args, {"tenant", "id", "changes"})
    changes = args.get("changes") or {}
    if not isinstance(changes, dict):
        raise ConfigError(f"expected an object, got {changes!r}", field="changes")
    return _opened(vendor, args).update(str(_required(args, "id")), changes)


def _remove(vendor: Vendor, args: dict[str, Any]) -> Any:
    _take(args, {"tenant", "id"})
    return {"removed": _opened(vendor, args).remove(str(_required(args, "id")))}


def _seed(vendor: Vendor, args: dict[str, Any]) -> Any:
    _take(args, {"tenant", "items"})
    items = _required(args, "items")
    if not isinstance(items, list):
        raise ConfigError(f"expected a list, got {items!r}", field="items")
    data = _opened(vendor, args)
    data.seed(items)
    return {"size": data.size()}


def _clear(vendor: Vendor, args: dict[str, Any]) -> Any:
    _take(args, {"tenant"})
    _opened(vendor, args).clear()
    return {"size": 0}


def _items(vendor: Vendor, args: dict[str, Any]) -> Any:
    _take(args, {"tenant"})
    return {"data": _existing(vendor, args).all_raw()}  # serialised at once: no copy needed


def _item(vendor: Vendor, args: dict[str, Any]) -> Any:
    _take(args, {"tenant", "id"})
    identity = str(_required(args, "id"))
    item = _existing(vendor, args).get(identity)
    if item is None:
        raise KeyError(identity)
    return item


def _size(vendor: Vendor, args: dict[str, Any]) -> Any:
    _take(args, {"tenant"})
    return {"size": _existing(vendor, args).size()}


def _tenants(vendor: Vendor, args: dict[str, Any]) -> Any:
    _take(args, set())
    return {"tenants": vendor.tenants()}


def _fail_next(vendor: Vendor, args: dict[str, Any]) -> Any:
    _take(args, {"status", "times", "retry_after", "problem", "body", "headers", "path"})
    vendor.fail_next(**args)
    return {"pending_faults": vendor.pending_faults()}


def _clear_faults(vendor: Vendor, args: dict[str, Any]) -> Any:
    _take(args, set())
    vendor.clear_faults()
    return {"pending_faults": 0}


def _set_latency(vendor: Vendor, args: dict[str, Any]) -> Any:
    _take(args, {"latency"})
    vendor.set_latency(_required(args, "latency"))
    return {"latency_ms": vendor.latency_ms}


def _set_rate_limit(vendor: Vendor, args: dict[str, Any]) -> Any:
    _take(args, {"style", "limit", "window", "reset", "reset_after", "per"})
    vendor.set_rate_limit(**args)
    return {"ok": True}


def _set_flag(method: str) -> _Action:
    def action(vendor: Vendor, args: dict[str, Any]) -> Any:
        _take(args, {"enabled"})
        enabled = args.get("enabled", True)
        if not isinstance(enabled, bool):
            raise ConfigError(f"expected true or false, got {enabled!r}", field="enabled")
        getattr(vendor, method)(enabled)
        return {"enabled": enabled}

    return action


def _reset_stats(vendor: Vendor, args: dict[str, Any]) -> Any:
    _take(args, set())
    vendor.reset_stats()
    return {"calls": 0}


def _query_int(args: Mapping[str, Any], name: str, default: int | None) -> int | None:
    raw = args.get(name)
    if raw in (None, ""):
        return default
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"expected an integer, got {raw!r}", field=name) from None


def _log(vendor: Vendor, args: dict[str, Any]) -> Any:
    _take(args, {"after", "limit"})
    after = _query_int(args, "after", 0) or 0
    records = vendor.log_after(after, _query_int(args, "limit", None))
    return {"entries": [record.to_dict() for record in records], "last_seq": vendor.last_seq}


def _stats(vendor: Vendor, args: dict[str, Any]) -> Any:
    _take(args, set())
    names = vendor.tenants()
    return {
        "calls": vendor.calls,
        "pending_faults": vendor.pending_faults(),
        "last_seq": vendor.last_seq,
        "log_size": len(vendor.log),
        "latency_ms": vendor.latency_ms,
        "tenants": len(names),
        "items": sum(vendor._dataset(name).size() for name in names),
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


def handle_control(vendor: Vendor, request: Request) -> Response:
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
        return json_response(200, run(vendor, args))
    except ConfigError as error:
        return problem_response(400, error.message)
    except KeyError as error:
        return problem_response(404, f"no item {error.args[0]!r}")
    except LookupError as error:
        return problem_response(404, str(error))
    except (TypeError, ValueError) as error:
        return problem_response(400, str(error))

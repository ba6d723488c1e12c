"""Must NOT type-check: a ``fetch`` that misuses ``ctx.http`` or what it returns.

Each ``# case:`` region (up to the next one) must draw at least one error from mypy --strict
and from pyright --strict, and the code before the first case none
(``tests/e2e/test_typing.py``).
"""

from __future__ import annotations

from typing import Any

import watukuy as wk


async def fine(ctx: wk.FetchContext[wk.PagePosition]) -> wk.Page[Any]:
    response = await ctx.http.get("https://erp.example.com/orders", params={"page": ctx.page})
    if response.not_modified:
        return wk.Page(items=[], has_more=False)
    return wk.Page(items=response.json(), has_more=False)


# case: a misspelt response attribute
async def typo(ctx: wk.FetchContext[wk.PagePosition]) -> wk.Page[Any]:
    response = await ctx.http.get("https://erp.example.com/orders")
    if response.not_modifed:
        return wk.Page(items=[], has_more=False)
    return wk.Page(items=response.json(), has_more=False)


# case: httpx's name for the status, written as requests spells it
async def status(ctx: wk.FetchContext[wk.PagePosition]) -> wk.Page[Any]:
    response = await ctx.http.get("https://erp.example.com/orders")
    return wk.Page(items=[], has_more=response.status_cod == 200)


# case: a keyword ctx.http does not take
async def keyword(ctx: wk.FetchContext[wk.PagePosition]) -> wk.Page[Any]:
    response = await ctx.http.get("https://erp.example.com/orders", query={"page": 1})
    return wk.Page(items=response.json(), has_more=False)


# case: a method ctx.http does not have
async def method(ctx: wk.FetchContext[wk.PagePosition]) -> wk.Page[Any]:
    response = await ctx.http.fetch("https://erp.example.com/orders")
    return wk.Page(items=response.json(), has_more=False)


# case: the response read as if it were not awaited
async def unawaited(ctx: wk.FetchContext[wk.PagePosition]) -> wk.Page[Any]:
    response = ctx.http.get("https://erp.example.com/orders")
    return wk.Page(items=response.json(), has_more=False)

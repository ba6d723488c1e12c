"""The HTTP helper is what ``FetchContext.http`` is typed as (``watukuy.FetchHttp``), and its
answers what that protocol promises (``watukuy.FetchResponse``), checked at run time too."""

from __future__ import annotations

import inspect

from http_fakes import BASE, HttpRig

import watukuy as wk


async def test_the_bound_helper_and_its_response_satisfy_the_protocols(rig: HttpRig) -> None:
    rig.reply(200, json={"data": []}, headers={"ETag": '"v1"'})
    http = rig.http()
    assert isinstance(http, wk.FetchHttp)
    response = await http.get(BASE)
    assert isinstance(response, wk.FetchResponse)
    assert response.headers["etag"] == '"v1"'


def test_the_protocol_takes_the_keywords_the_helper_takes() -> None:
    # A keyword the helper grows must be added to the protocol, or fetch cannot use it typed.
    from watukuy.http import HttpClient

    for name in ("get", "request"):
        helper = inspect.signature(getattr(HttpClient, name)).parameters
        promised = inspect.signature(getattr(wk.FetchHttp, name)).parameters
        assert list(helper) == list(promised), name
        for parameter, given in promised.items():
            assert helper[parameter].kind == given.kind, (name, parameter)
            assert helper[parameter].default == given.default, (name, parameter)

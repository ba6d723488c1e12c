"""A body ``json()`` cannot read says what came instead of a bare decoder error."""

from __future__ import annotations

import pytest
from http_fakes import BASE, HttpRig

from watukuy.model.errors import WatukuyError

PAGE = b"<!DOCTYPE html><html><head><title>Down for maintenance</title></head></html>"


async def test_an_html_page_instead_of_json_names_status_type_bytes_and_url(
    rig: HttpRig,
) -> None:
    rig.reply(200, content=PAGE, headers={"content-type": "text/html; charset=utf-8"})
    response = await rig.http().get(f"{BASE}?api_key=s3cr3t-value&page=2")
    with pytest.raises(WatukuyError) as caught:
        response.json()
    message = str(caught.value)
    assert caught.value.code == "INVALID_PAGE"
    assert isinstance(caught.value, ValueError)
    assert message.startswith("GET https://api.example.com/items?")
    assert "answered 200 (text/html; charset=utf-8) with a body that is not JSON;" in message
    assert "it starts b'<!DOCTYPE html><html><head><title>Down for maintenance" in message
    assert "s3cr3t-value" not in message
    assert "page=2" in message


async def test_a_body_that_is_not_utf8_says_so(rig: HttpRig) -> None:
    body = b'{"data": ["caf\xe9"]}'
    rig.reply(200, content=body, headers={"content-type": "application/json"})
    response = await rig.http().get(BASE)
    with pytest.raises(WatukuyError) as caught:
        response.json()
    message = str(caught.value)
    assert "with a body that is not valid UTF-8 (byte 14)" in message
    assert 'it starts b\'{"data": ["caf\\xe9"]}\'' in message
    assert "surrogates" not in message


async def test_broken_json_keeps_the_decoder_message_and_the_first_bytes(rig: HttpRig) -> None:
    body = b'{"data": [' + b"1," * 200
    rig.reply(502, content=body, headers={"content-type": "application/json"})
    response = await rig.http().get(BASE, raise_for_status=False)
    with pytest.raises(WatukuyError) as caught:
        response.json()
    message = str(caught.value)
    assert "answered 502 (application/json) with invalid JSON (" in message
    assert message.endswith(f"... ({len(body)} bytes)")


async def test_a_body_without_content_type(rig: HttpRig) -> None:
    rig.reply(200, content=b"OK")
    response = await rig.http().get(BASE)
    with pytest.raises(
        WatukuyError,
        match=r"answered 200 \(no content type\) with a body that is not JSON; it starts b'OK'$",
    ):
        response.json()

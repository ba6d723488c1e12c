"""The admin page in a real headless Chromium, against a running engine (see conftest.py).

One site and one browser for the module; the tests run in order and each leaves the keys as
it found them (resumed, nothing parked).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from .conftest import AUTH_COOKIE, Site

T = TypeVar("T")


def wait_for(check: Callable[[], T], timeout: float = 10, every: float = 0.1) -> T:
    """Poll ``check`` until it returns something truthy (else fail with the last value).

    The page replaces its live parts every second, so an element found a moment ago may be
    gone: such a check counts as not done yet.
    """
    from selenium.common.exceptions import StaleElementReferenceException

    deadline = time.monotonic() + timeout
    while True:
        value: T | None
        try:
            value = check()
        except StaleElementReferenceException:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting after {timeout}s (last value {value!r})")
        time.sleep(every)


def click(driver: Any, selector: str) -> None:
    """Click the first match of ``selector``, again if a live refresh replaced it."""

    def attempt() -> bool:
        css(driver, selector)[0].click()
        return True

    wait_for(attempt, timeout=5)


def keys_shown(driver: Any, selector: str = "tr[data-key]") -> list[str]:
    """The ``data-key`` of every matching row, read in one step."""
    found: list[str] = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]))"
        ".map(function (row) { return row.getAttribute('data-key'); });",
        selector,
    )
    return found


def css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))


def flash(driver: Any) -> str:
    found = css(driver, "#flash")
    return str(found[0].text) if found else ""


def shoot(driver: Any, path: Path, width: int = 1280, height: int = 800) -> None:
    """A screenshot of the whole page at ``width``, at least ``height`` tall."""
    driver.set_window_size(width, height)
    full = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, max(height, min(int(full) + 20, 4000)))
    driver.save_screenshot(str(path))
    driver.set_window_size(1280, 800)


def open_key(driver: Any, site: Site, poller: str, partition: str = "") -> None:
    driver.get(f"{site.admin}key?poller={poller}&partition={partition}")


# --- auth and CSRF -----------------------------------------------------------------------


def test_a_request_without_auth_is_refused(site: Site) -> None:
    for path in ("", "key?poller=vendor", "parked", "static/admin.css"):
        assert httpx.get(site.admin + path).status_code == 403, path
    refused = httpx.post(site.admin + "action", data={"action": "pause", "poller": "vendor"})
    assert refused.status_code == 403
    allowed = httpx.get(site.admin, cookies=dict([AUTH_COOKIE]))
    assert allowed.status_code == 200
    assert "frame-ancestors 'none'" in allowed.headers["content-security-policy"]


def test_a_post_without_the_csrf_token_fails(site: Site) -> None:
    with httpx.Client(base_url=site.admin, cookies=dict([AUTH_COOKIE])) as client:
        client.get("")  # the page hands out its session cookie
        form = {"action": "pause", "poller": "vendor", "partition": ""}
        assert client.post("action", data=form).status_code == 403
        assert client.post("action", data={**form, "csrf": "0" * 64}).status_code == 403
    state = site.state("vendor")
    assert state is None or not state.paused


# --- the pages ---------------------------------------------------------------------------


def test_the_overview_shows_the_open_circuit_and_its_key_page(
    site: Site, browser: Any, screenshots: Path
) -> None:
    def open_rows() -> list[str]:
        browser.get(site.admin)
        return keys_shown(browser, 'tr[data-circuit="open"]')

    assert wait_for(open_rows, timeout=15, every=0.3) == ["vendor/"]
    assert keys_shown(browser) == ["orders/acme", "orders/globex", "orders/initech", "vendor/"]
    shoot(browser, screenshots / "overview.png")
    shoot(browser, screenshots / "overview-narrow.png", width=420, height=900)

    click(browser, 'tr[data-circuit="open"] td.keycell a')
    wait_for(lambda: "vendor" in browser.find_element("css selector", "h1").text)
    error = wait_for(lambda: css(browser, "#key-error")[0].text)
    assert "HttpError" in error
    assert "503" in error
    shoot(browser, screenshots / "key-vendor.png")

    browser.get(site.admin + "?status=open")
    assert keys_shown(browser) == ["vendor/"]


def test_a_parked_event_is_retried_and_delivered(
    site: Site, browser: Any, screenshots: Path
) -> None:
    def parked_row() -> Any:
        open_key(browser, site, "orders", "acme")
        rows = css(browser, "tr[data-parked-id]")
        return rows[0] if rows else None

    row = wait_for(parked_row, timeout=15, every=0.3)
    assert site.bad_subject in row.text
    assert "warehouse rejected" in row.text
    assert "sk_live_not_shown" not in browser.page_source  # the redaction policy applies
    assert ("acme", site.bad_subject) not in site.delivered
    wait_for(lambda: css(browser, "#key-chart svg.chart"))  # the live refresh charts the lag
    shoot(browser, screenshots / "key-orders-acme.png")
    shoot(browser, screenshots / "key-orders-acme-narrow.png", width=420, height=900)

    site.fixed.set()  # the handler is fixed and deployed
    click(browser, "tr[data-parked-id] input[type=checkbox]")
    click(browser, '[data-action="retry-selected"]')
    wait_for(lambda: "Retried 1 parked event" in flash(browser))
    wait_for(lambda: ("acme", site.bad_subject) in site.delivered)
    # The live refresh shows it without a reload.
    wait_for(
        lambda: (
            css(browser, '[data-field="parked"]')[0].text == "0"
            and css(browser, '[data-field="outbox"]')[0].text == "0"
        )
    )


def test_a_key_is_paused_and_resumed(site: Site, browser: Any) -> None:
    open_key(browser, site, "orders", "globex")
    click(browser, '[data-action="pause"]')
    wait_for(lambda: "Paused" in flash(browser))  # not the flash of the action before
    assert site.state("orders", "globex").paused
    wait_for(lambda: css(browser, "#key-status .s-paused"))

    click(browser, '[data-action="resume"]')
    wait_for(lambda: "Resumed" in flash(browser))  # not the flash of the action before
    assert not site.state("orders", "globex").paused
    assert css(browser, '[data-action="pause"]')


def test_a_poll_is_triggered(site: Site, browser: Any) -> None:
    before = site.state("orders", "initech").schedule.last_poll_at
    assert before is not None  # polled once at start, and not due again for an hour
    open_key(browser, site, "orders", "initech")
    click(browser, '[data-action="trigger"]')
    wait_for(lambda: "Triggered" in flash(browser))
    wait_for(lambda: site.state("orders", "initech").schedule.last_poll_at != before)


def test_resetting_a_cursor_asks_for_confirmation(site: Site, browser: Any) -> None:
    open_key(browser, site, "orders", "initech")
    live = site.state("orders", "initech").cursors["live"]
    field = css(browser, 'form input[name="to"]')[0]
    field.send_keys("null")
    click(browser, '[data-action="reset"]')
    wait_for(lambda: css(browser, '[data-action="confirm"]'))
    assert site.state("orders", "initech").cursors["live"] == live  # nothing happened yet
    click(browser, '[data-action="confirm"]')
    wait_for(lambda: "reset to the initial cursor" in flash(browser))

"""RFC 9457 Problem Details: what counts as a problem, what is kept, and fuzzing."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watukuy.http import parse_problem_details

PROBLEM = {
    "type": "https://example.com/probs/out-of-credit",
    "title": "You do not have enough credit.",
    "status": 403,
    "detail": "Your current balance is 30, but that costs 50.",
    "instance": "/account/12345/msgs/abc",
    "balance": 30,
    "accounts": ["/account/12345", "/account/67890"],
}


def test_problem_json_with_parameters_keeps_extensions() -> None:
    body = json.dumps(PROBLEM)
    assert parse_problem_details("application/problem+json; charset=utf-8", body) == PROBLEM
    assert parse_problem_details("application/problem+json", body.encode()) == PROBLEM


def test_media_type_is_case_insensitive() -> None:
    assert parse_problem_details("Application/Problem+JSON", '{"title":"x"}') == {"title": "x"}


def test_problem_json_needs_no_standard_member() -> None:
    assert parse_problem_details("application/problem+json", '{"code":"E1"}') == {"code": "E1"}


def test_plain_json_needs_a_standard_member() -> None:
    assert parse_problem_details("application/json", '{"title":"Nope","status":404}') == {
        "title": "Nope",
        "status": 404,
    }
    assert parse_problem_details("application/json", '{"detail":"d"}') == {"detail": "d"}
    assert parse_problem_details("application/json", '{"type":"about:blank"}') == {
        "type": "about:blank"
    }
    assert parse_problem_details("application/vnd.api+json", '{"detail":"d"}') == {"detail": "d"}
    assert parse_problem_details("application/json", '{"error":"boom"}') is None


@pytest.mark.parametrize("content_type", ["text/plain", "text/html", None, "", ";;;"])
def test_non_json_media_types_are_not_read(content_type: str | None) -> None:
    assert parse_problem_details(content_type, '{"title":"x"}') is None


@pytest.mark.parametrize("body", ["{not json", '["title"]', '"title"', "null", "", "   ", None])
def test_bodies_that_are_not_objects(body: str | None) -> None:
    assert parse_problem_details("application/problem+json", body) is None


def test_ill_typed_standard_members_are_dropped() -> None:
    body = json.dumps({"status": "404", "title": 42, "detail": None, "type": ["x"], "instance": 1})
    assert parse_problem_details("application/problem+json", body) == {"status": 404}
    assert parse_problem_details("application/problem+json", '{"status":"abc"}') == {}
    assert parse_problem_details("application/problem+json", '{"status":true}') == {}
    assert parse_problem_details("application/problem+json", '{"status":422.0}') == {"status": 422}
    assert parse_problem_details("application/problem+json", '{"status":422.5}') == {}


def test_odd_input_never_raises() -> None:
    assert parse_problem_details("application/json", "\x00") is None
    assert parse_problem_details("application/json", b"\xff\xfe{") is None
    assert parse_problem_details("application/json", "[" * 100_000) is None


@given(
    st.one_of(
        st.none(),
        st.text(),
        st.sampled_from(["application/json", "application/problem+json", "x/y+json"]),
    ),
    st.one_of(st.none(), st.text(), st.binary()),
)
def test_fuzz_problem_never_raises(content_type: str | None, body: str | bytes | None) -> None:
    problem = parse_problem_details(content_type, body)
    assert problem is None or isinstance(problem, dict)


@given(
    st.dictionaries(
        st.sampled_from(["type", "title", "status", "detail", "instance", "extra"]),
        st.one_of(st.none(), st.booleans(), st.integers(), st.text(), st.lists(st.integers())),
    )
)
def test_fuzz_kept_standard_members_are_well_typed(members: dict[str, object]) -> None:
    problem = parse_problem_details("application/problem+json", json.dumps(members))
    assert problem is not None
    for key in ("type", "title", "detail", "instance"):
        assert key not in problem or isinstance(problem[key], str)
    assert "status" not in problem or type(problem["status"]) is int
    assert problem.get("extra") == members.get("extra")

"""The registry's compatibility rule is set however slowly its journal answers: a PUT that
times out or meets the rule not yet replayed (409) is asked again, and one that never
succeeds names the registry, the level and what it answered."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from fluxgate_stack.errors import StackError
from fluxgate_stack.servers import registry

URL = "http://127.0.0.1:1/apis/ccompat/v7"


def answers(monkeypatch: pytest.MonkeyPatch, *outcomes: int | type[Exception]) -> list[dict[str, Any]]:
    """``httpx.put`` answering each call in turn: a status code, or an exception raised; the
    last outcome repeats."""
    calls: list[dict[str, Any]] = []

    def put(url: str, **kwargs: Any) -> httpx.Response:
        calls.append({"url": url, **kwargs})
        outcome = outcomes[min(len(calls), len(outcomes)) - 1]
        if isinstance(outcome, type):
            raise outcome("timed out")
        return httpx.Response(outcome, text="{}", request=httpx.Request("PUT", url))

    monkeypatch.setattr(registry.httpx, "put", put)
    monkeypatch.setattr(registry.time, "sleep", lambda _: None)
    return calls


def test_a_put_that_times_out_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = answers(monkeypatch, httpx.ReadTimeout, httpx.ReadTimeout, 200)
    registry.set_compatibility(URL, "BACKWARD")
    assert len(calls) == 3
    assert all(call["json"] == {"compatibility": "BACKWARD"} for call in calls)


def test_a_rule_not_yet_replayed_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = answers(monkeypatch, 409, 409, 200)
    registry.set_compatibility(URL, "BACKWARD")
    assert len(calls) == 3


def test_a_registry_that_never_answers_fails_once_patience_runs_out(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = answers(monkeypatch, httpx.ReadTimeout)
    with pytest.raises(StackError, match=r"registry: PUT /config BACKWARD got no answer within 0 s"):
        registry.set_compatibility(URL, "BACKWARD", patience=0.0)
    assert len(calls) >= 1


def test_any_other_refusal_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = answers(monkeypatch, 500)
    with pytest.raises(StackError, match=r"answered 500"):
        registry.set_compatibility(URL, "BACKWARD")
    assert len(calls) == 1

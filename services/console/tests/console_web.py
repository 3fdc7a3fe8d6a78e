"""The console's web app over recorded answers, for the unit tests of the page, replay and security."""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from typing import Any

from console_recorded import RecordedKafka, Services, aggregator_letter, gateway_letter
from starlette.testclient import TestClient

from fluxgate_console.deadletters import DeadLetter, DeadLetterBook
from fluxgate_console.refresh import Console
from fluxgate_console.replay import Outcome, Plan
from fluxgate_console.settings import ConsoleSettings
from fluxgate_console.web import Web

CLOCK_S = 1_700_000_100.0  # the letters' minutes: the gateway's 2 minutes ago, the aggregator's 1


class FakeReplayer:
    def __init__(self) -> None:
        self.replayed: list[tuple[list[str], str]] = []

    def plan(self, letters: list[DeadLetter]) -> Plan:
        return Plan([x for x in letters if x.replay_target], [], [(x.id, "no") for x in letters if not x.replay_target])

    def replay(self, letters: list[DeadLetter], who: str, selection: dict[str, Any]) -> Outcome:
        plan = self.plan(letters)
        self.replayed.append(([x.id for x in plan.send], who))
        return Outcome("r-1", [{"deadletter_offset": x.offset} for x in plan.send], plan)


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


async def web_for(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services, more: Sequence[DeadLetter] = ()
) -> tuple[TestClient, Any]:
    book = DeadLetterBook(settings.deadletters, clock=lambda: CLOCK_S)
    book.add([gateway_letter(1), aggregator_letter(2, 99), *more])
    console = Console(settings, kafka, book, client=services.client())
    await console.refresh()
    replayer = FakeReplayer()
    return TestClient(Web(console, replayer, lambda: None).app()), replayer  # type: ignore[arg-type]


def csrf_token(client: TestClient, **headers: str) -> str:
    """The token the page carries (asked with ``headers``: credentials that may look)."""
    page = client.get("/", headers=headers).text
    found = re.search(r'<meta name="csrf-token" content="([^"]+)">', page)
    assert found, "the page carries its CSRF token"
    return found.group(1)


def same_site(client: TestClient, **headers: str) -> dict[str, str]:
    """What the page's own script sends with a post: its origin and its token."""
    return {"Origin": "http://testserver", "X-CSRF-Token": csrf_token(client, **headers), **headers}

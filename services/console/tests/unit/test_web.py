"""The page: every part renders, one failing part shows as that part; auth for the page and,
separately, for replay."""

from __future__ import annotations

import re

import pytest
from console_recorded import NO_STORES, TEST_HOST, RecordedKafka, Services, forged_letter
from console_web import basic, same_site, web_for

from fluxgate_console.deadletters import DeadLetter
from fluxgate_console.settings import ConsoleSettings, DeadLetterSettings
from fluxgate_core.deadletter import dead_letter_headers


@pytest.fixture
def secured() -> ConsoleSettings:
    return ConsoleSettings.model_validate(
        {
            "page_auth": {"mode": "basic", "username": "ops", "password": "page-secret"},
            "replay_auth": {"mode": "bearer", "token": "replay-token"},
            **NO_STORES,
            **TEST_HOST,
        }
    )


async def test_the_page_shows_every_part_failed_first(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    client, _ = await web_for(settings, kafka, services)
    page = client.get("/").text
    for part in ('id="summary"', 'id="flow"', 'id="services"', 'id="deadletters"', 'id="stores"'):
        assert part in page
    table = page.index('id="services"')
    assert page.index('data-service="coap-ingest"', table) < page.index('data-service="aggregator"', table)
    assert "Connection refused" in page and "/metrics unreadable" in page
    assert "value &#39;warm&#39; is not a number" in page  # a dead letter with its reason, escaped
    assert 'data-letter="sensors.deadletter/1/2"' in page and "→ sensors.readings" in page
    assert 'class="age" data-at=' in page  # every figure says how old it is


async def test_one_part_failing_leaves_the_others(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, _ = await web_for(settings, kafka, services)
    monkeypatch.setattr(DeadLetter, "preview", lambda self, limit: 1 / 0)
    parts = client.get("/parts").text
    assert "this part failed: ZeroDivisionError" in parts
    assert 'id="flow"' in parts and 'data-service="aggregator"' in parts


async def test_filters_in_the_parts(settings: ConsoleSettings, kafka: RecordedKafka, services: Services) -> None:
    client, _ = await web_for(settings, kafka, services)
    parts = client.get("/parts", params={"reason": "schema"}).text
    assert 'data-letter="sensors.deadletter/1/2"' in parts and 'data-letter="sensors.deadletter/0/1"' not in parts
    letters = client.get("/api/deadletters", params={"source": "mqtt"}).json()
    assert [x["id"] for x in letters] == ["sensors.deadletter/0/1"]
    assert letters[0]["headers"]["fluxgate.dlq.reason"] == "value 'warm' is not a number"


async def test_page_auth(secured: ConsoleSettings, kafka: RecordedKafka, services: Services) -> None:
    client, _ = await web_for(secured, kafka, services)
    refused = client.get("/")
    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Basic")
    assert client.get("/", headers=basic("ops", "wrong")).status_code == 401
    assert client.get("/connect/connectors", headers=basic("ops", "page-secret")).status_code == 200


async def test_replay_needs_its_own_credentials_and_a_confirmation(
    secured: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    client, replayer = await web_for(secured, kafka, services)
    asked = {"filter": {"reason": "schema"}}
    viewer = same_site(client, **basic("ops", "page-secret"))
    assert client.post("/api/replay", json=asked, headers=viewer).status_code == 403  # a viewer may not replay
    bearer = same_site(client, Authorization="Bearer replay-token")
    plan = client.post("/api/replay", json=asked, headers=bearer).json()
    assert plan["confirmed"] is False and [x["id"] for x in plan["send"]] == ["sensors.deadletter/1/2"]
    assert replayer.replayed == []
    done = client.post("/api/replay", json={**asked, "confirm": True}, headers=bearer).json()
    assert done["replay_id"] == "r-1" and replayer.replayed == [(["sensors.deadletter/1/2"], "bearer")]
    everything = client.post("/api/replay", json={"confirm": True}, headers=bearer)
    assert everything.status_code == 400  # an empty selection is not "all of them"


def sink_failures(reasons: int, at_ms: int = 1_700_000_090_000) -> list[DeadLetter]:
    """Dead letters of ``reasons`` distinct reasons, one each, from the es-persister."""
    return [
        DeadLetter("persisters.deadletter", 0, i, at_ms, None, b"{}", dead_letter_headers(
            reason=f"document {'abcdefghij'[i]} refused", error_class="BulkIndexError", source="t/0/1",
            service="es-persister",
        ))
        for i in range(reasons)
    ]  # fmt: skip


def by_minute_rows(page: str, topic: str, what: str) -> dict[str, int]:
    """Each row of a topic's per-minute table: its key and how many bars its sparkline has."""
    part = page[page.index(f'data-dlq="{topic}"') :]
    start = part.index(f'data-by="{what}"')
    table = part[start : part.index("</table>", start)]
    rows = re.findall(r'<tr data-key="([^"]*)">(.*?)</tr>', table, re.S)
    assert all(row.count("<svg") == 1 for _, row in rows)
    return {key: row.count("<rect") for key, row in rows}


async def test_counts_per_minute_by_reason_and_service_as_sparklines(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    client, _ = await web_for(settings, kafka, services, sink_failures(9) + sink_failures(1, at_ms=1_700_000_000_000))
    page = client.get("/").text
    assert by_minute_rows(page, "sensors.deadletter", "reason") == {
        "PayloadError: value &#39;warm&#39; is not a number": 1,
        "SerializationError: unknown schema id N: not registered when the job started": 1,
    }  # fmt: skip
    assert by_minute_rows(page, "sensors.deadletter", "service") == {"aggregator": 1, "mqtt-proxy": 1}
    # ten distinct reasons, eight kept; document a failed in two minutes
    sink_reasons = by_minute_rows(page, "persisters.deadletter", "reason")
    assert len(sink_reasons) == 9 and sink_reasons["(other)"] == 1
    assert sink_reasons["BulkIndexError: document a refused"] == 2
    assert "reasons beyond the 8 kept" in page
    assert by_minute_rows(page, "persisters.deadletter", "service") == {"es-persister": 2}
    assert page.count('<svg class="spark" width="180" height="28"') == 2  # each topic's 30 minutes


async def test_the_time_filter_counts_back_from_the_books_clock(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    client, _ = await web_for(settings, kafka, services)
    parts = client.get("/parts", params={"since_min": "1.5"}).text
    assert 'data-letter="sensors.deadletter/1/2"' in parts and 'data-letter="sensors.deadletter/0/1"' not in parts
    letters = client.get("/api/deadletters", params={"since_min": "3"}).json()
    assert [x["id"] for x in letters] == ["sensors.deadletter/1/2", "sensors.deadletter/0/1"]


async def test_the_page_follows_the_timeline_settings(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    counting = DeadLetterSettings(timeline_minutes=20, kept_reasons=3, kept_services=1)
    client, _ = await web_for(settings.model_copy(update={"deadletters": counting}), kafka, services, sink_failures(5))
    page = client.get("/").text
    assert "per minute, last 20 min" in page and "last 60 min" not in page
    assert "reasons beyond the 3 kept" in page and "services beyond the 1 kept" in page
    assert len(by_minute_rows(page, "persisters.deadletter", "reason")) == 4  # three kept and "(other)"
    assert by_minute_rows(page, "sensors.deadletter", "service") == {"mqtt-proxy": 1, "(other)": 1}  # first come
    assert page.count('<svg class="spark" width="120" height="16"') == 9  # every row: 20 bars of 6 px
    assert 'title="dead letters per minute, last 20 minutes"' in page  # each topic's overview, no longer


async def test_from_and_until_in_the_parts_and_the_api(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    client, _ = await web_for(settings, kafka, services)  # letters at 22:13:20 and 22:14:20 UTC
    page = client.get("/").text
    assert page.count('type="datetime-local"') == 2 and "from and until are UTC" in page
    parts = client.get("/parts", params={"from": "2023-11-14T22:14", "until": "2023-11-14T22:15"}).text
    assert 'data-letter="sensors.deadletter/1/2"' in parts and 'data-letter="sensors.deadletter/0/1"' not in parts
    letters = client.get("/api/deadletters", params={"until": "2023-11-14T22:13:20"}).json()
    assert [x["id"] for x in letters] == ["sensors.deadletter/0/1"]  # both ends included


async def test_until_before_from_is_said_not_a_server_error(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    client, _ = await web_for(settings, kafka, services)
    backwards = {"from": "2023-11-14T22:15", "until": "2023-11-14T22:14"}
    parts = client.get("/parts", params=backwards)
    assert parts.status_code == 200 and 'id="filter-error"' in parts.text
    assert "until (2023-11-14T22:14) is before from (2023-11-14T22:15)" in parts.text
    assert "data-letter=" not in parts.text and 'id="flow"' in parts.text  # no letters; the rest as usual
    api = client.get("/api/deadletters", params=backwards)
    assert api.status_code == 400 and "is before from" in api.json()["message"]
    replay = client.post("/api/replay", json={"filter": {"from": "soon"}}, headers=same_site(client))
    assert replay.status_code == 400 and replay.json()["message"].startswith("from: 'soon'")


async def test_a_letter_whose_target_is_not_allowed_shows_as_not_replayable(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    """Issue 35: the page and the API say a forged target is refused, and why; no box to tick."""
    client, _ = await web_for(settings, kafka, services, [forged_letter(8)])
    page = client.get("/").text
    row = page[page.index('data-letter="sensors.deadletter/0/8"') :]
    row = row[: row.index("</tr>")]
    assert 'class="pick"' not in row and "not an allowed replay target" in row
    (letter,) = [x for x in client.get("/api/deadletters").json() if x["id"] == "sensors.deadletter/0/8"]
    assert letter["replay_target"] is None and "temperatures.aggregated" in letter["not_replayable_because"]

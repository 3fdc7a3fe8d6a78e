"""The console's Elasticsearch view against the secured node (``elasticsearch-secured``): HTTPS
from the stack's CA and the console's read-only user (password from a file), as its settings
give them; what the es-persister's user wrote is counted and the newest aggregate shown."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from fluxgate_console.settings import ConsoleSettings
from fluxgate_console.store_clients import check_elasticsearch, elasticsearch_options
from fluxgate_console.stores import elasticsearch
from fluxgate_core.settings import load_settings

pytestmark = pytest.mark.integration


@pytest.fixture
def family(secured_elasticsearch: Any) -> Iterator[str]:
    """Two documents in a daily index of the test's own, written as the es-persister's user."""
    name = f"temperatures_{uuid.uuid4().hex[:10]}"
    verify = str(secured_elasticsearch.ca_file)
    with httpx.Client(base_url=secured_elasticsearch.url, verify=verify, timeout=30) as es:
        writer = secured_elasticsearch.user("es-persister")
        for device, start in (("d1", "2026-11-25T10:00:00Z"), ("d2", "2026-11-25T10:01:00Z")):
            document = {"device_id": device, "window_start": start}
            url = f"/{name}-2026.11.25/_doc/{device}"
            assert es.put(url, json=document, auth=writer, params={"refresh": "true"}).status_code == 201
        alias = {"actions": [{"add": {"index": f"{name}-*", "alias": name}}]}  # the persister's template's
        assert es.post("/_aliases", json=alias, auth=secured_elasticsearch.user("admin")).status_code == 200
        yield name
        es.delete(f"/{name}-*", auth=secured_elasticsearch.user("admin"))


async def test_the_console_reads_the_secured_node_as_its_own_user(
    secured_elasticsearch: Any, family: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in secured_elasticsearch.env("FLUXGATE_CONSOLE_", "console").items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("FLUXGATE_CONSOLE_ELASTICSEARCH__ALIAS", family)
    es = load_settings(ConsoleSettings).elasticsearch
    async with httpx.AsyncClient(**elasticsearch_options(es, 10.0)) as client:
        await check_elasticsearch(client, es)  # its start-up question: answered, nothing raised
        view = await elasticsearch(client, es.hosts, es.alias)
    assert view.error is None, view.error
    assert view.total == 2 and [held.name for held in view.holds] == [f"{family}-2026.11.25"]
    assert view.newest is not None and view.newest["device_id"] == "d2"

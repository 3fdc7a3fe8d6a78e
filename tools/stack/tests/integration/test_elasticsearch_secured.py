"""The secured Elasticsearch node (``elasticsearch-secured``) on the real server: TLS from the
stack's CA only, no request without credentials, and each service's user able to do its work
on indices of the test's own (``temperatures_<id>*``, inside its role's pattern) and no more."""

from __future__ import annotations

import json
import stat
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from fluxgate_stack.secured_elasticsearch import ROLES, SecuredElasticsearch, credentials_dir
from fluxgate_stack.servers.elasticsearch_secured import ElasticsearchSecuredServer

pytestmark = pytest.mark.integration


def client(node: SecuredElasticsearch, role: str | None = None) -> httpx.Client:
    auth = node.user(role) if role else None
    return httpx.Client(base_url=node.url, verify=str(node.ca_file), auth=auth, timeout=30.0)


@pytest.fixture(params=["temperatures_{}", "soak_{}_temperature_aggregates"])
def family(secured_elasticsearch: SecuredElasticsearch, request: pytest.FixtureRequest) -> Iterator[str]:
    """A name of the test's own inside the roles' patterns: the default alias's, and a prefixed
    pipeline's (run_pipeline's ``Names``); its indices go at the end."""
    name = str(request.param).format(uuid.uuid4().hex[:10])
    yield name
    with client(secured_elasticsearch, "admin") as admin:
        admin.delete(f"/{name}*", params={"expand_wildcards": "all"})
        admin.delete(f"/_index_template/{name}")


def write_daily(es: httpx.Client, family: str, day: str = "2026.11.26") -> httpx.Response:
    """What the es-persister does: its template (with the alias), then a bulk into a daily index."""
    template = {
        "index_patterns": [f"{family}-*"],
        "template": {"settings": {"number_of_replicas": 0}, "aliases": {family: {}}},
    }
    put = es.put(f"/_index_template/{family}", json=template)
    assert put.status_code == 200, put.text
    lines = [{"index": {"_index": f"{family}-{day}", "_id": "d1"}}, {"device_id": "d1", "avg": 21.5}]
    body = "".join(json.dumps(line) + "\n" for line in lines)
    return es.post("/_bulk", content=body, headers={"Content-Type": "application/x-ndjson"}, params={"refresh": "true"})


def test_https_needs_the_stack_ca(secured_elasticsearch: SecuredElasticsearch) -> None:
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(secured_elasticsearch.url + "/_cluster/health", auth=secured_elasticsearch.user("console"))
    plain = secured_elasticsearch.url.replace("https://", "http://")
    with pytest.raises(httpx.HTTPError):  # the port speaks TLS only
        httpx.get(plain + "/_cluster/health", timeout=5.0)


def test_no_request_without_credentials_or_with_a_wrong_password(
    secured_elasticsearch: SecuredElasticsearch,
) -> None:
    with client(secured_elasticsearch) as anonymous:
        assert anonymous.get("/_cluster/health").status_code == 401
        assert anonymous.get("/temperatures/_search").status_code == 401
    username, password = secured_elasticsearch.user("es-persister")
    with httpx.Client(verify=str(secured_elasticsearch.ca_file), auth=(username, password[::-1])) as wrong:
        assert wrong.get(secured_elasticsearch.url + "/_cluster/health").status_code == 401


def test_each_service_user_logs_in_with_its_own_role(secured_elasticsearch: SecuredElasticsearch) -> None:
    for role, spec in ROLES.items():
        with client(secured_elasticsearch, role) as es:
            me = es.get("/_security/_authenticate").json()
        assert (me["username"], me["roles"]) == (spec.username, [spec.role]), role


def test_the_persister_writes_and_expires_its_indices(secured_elasticsearch: SecuredElasticsearch, family: str) -> None:
    with client(secured_elasticsearch, "es-persister") as es:
        assert es.get("/_cluster/health").status_code == 200  # its start-up check
        written = write_daily(es, family)
        assert written.status_code == 200 and not written.json()["errors"], written.text
        upsert = {"doc": {"avg": 22.0}, "doc_as_upsert": True}
        assert es.post(f"/{family}-2026.11.26/_update/d1", json=upsert).status_code == 200
        listed = es.get(f"/_cat/indices/{family}-*", params={"format": "json", "h": "index,status"})  # retention
        assert [row["index"] for row in listed.json()] == [f"{family}-2026.11.26"], listed.text
        assert es.post(f"/{family}-2026.11.26/_close").status_code == 200
        assert es.delete(f"/{family}-2026.11.26").status_code == 200


def test_the_persister_may_not_read_or_touch_other_indices(
    secured_elasticsearch: SecuredElasticsearch, family: str
) -> None:
    with client(secured_elasticsearch, "es-persister") as es:
        assert write_daily(es, family).status_code == 200
        assert es.get(f"/{family}/_search").status_code == 403  # it writes; reading is the console's
        assert es.put(f"/logs_{uuid.uuid4().hex[:10]}/_doc/1", json={"a": 1}).status_code == 403
        settings = {"persistent": {"cluster.routing.allocation.enable": "all"}}
        assert es.put("/_cluster/settings", json=settings).status_code == 403
        assert es.get("/_security/user").status_code == 403


def test_the_console_reads_and_may_not_write(secured_elasticsearch: SecuredElasticsearch, family: str) -> None:
    with client(secured_elasticsearch, "es-persister") as persister:
        assert write_daily(persister, family).status_code == 200
    with client(secured_elasticsearch, "console") as console:
        indices = console.get(f"/_cat/indices/{family}", params={"format": "json", "h": "index,docs.count"})
        assert indices.status_code == 200 and indices.json()[0]["docs.count"] == "1", indices.text
        found = console.get(f"/{family}/_search", params={"size": 1, "sort": "avg:desc"})
        assert found.json()["hits"]["hits"][0]["_source"]["device_id"] == "d1", found.text
        assert console.put(f"/{family}-2026.11.26/_doc/d2", json={"device_id": "d2"}).status_code == 403
        assert console.delete(f"/{family}-2026.11.26").status_code == 403
        assert console.put(f"/_index_template/{family}", json={"index_patterns": ["x*"]}).status_code == 403


def test_passwords_are_kept_private_and_never_logged(secured_elasticsearch: SecuredElasticsearch) -> None:
    server = ElasticsearchSecuredServer(secured_elasticsearch.settings)
    log = server.log_file.read_text(errors="replace")
    for spec in ROLES.values():
        password_file = credentials_dir(secured_elasticsearch.settings) / f"{spec.username}.password"
        assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
        assert password_file.read_text() not in log
    for private in (server.config_dir / "users", server.certs_dir / "server.key"):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600, private
    written: dict[Any, str] = server.config_files()
    assert not any(secured_elasticsearch.user(role)[1] in text for role in ROLES for text in written.values())

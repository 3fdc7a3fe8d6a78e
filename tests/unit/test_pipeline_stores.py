"""The Elasticsearch count of the live view, against a stand-in HTTP server: a count that fails
(an error status, a timeout, the server gone) reads as the last one seen, never as 0; an alias
with no index behind it (404) is 0. The Cassandra count is tested against the real server
(tests/integration/test_pipeline_stores.py)."""

from __future__ import annotations

from fluxgate_testing.json_server import JsonServer
from pipeline_stores import Stores

from fluxgate_stack import Endpoints


def stores_at(url: str) -> Stores:
    endpoints = Endpoints(bootstrap="", registry_url="", mqtt_host="", mqtt_port=0, coap_url="",
                          elasticsearch_url=url, cassandra_host="", cassandra_port=0,
                          hazelcast_address="", hazelcast_cluster="")  # fmt: skip
    return Stores(endpoints)


def test_a_failed_count_reads_as_the_last_one_seen() -> None:
    script = [(404, {}), (200, {"count": 7}), (503, {}), (200, {"count": 9})]

    def count(method: str, path: str, body: bytes) -> tuple[int, dict[str, int]]:
        assert method == "GET"
        return script.pop(0)

    with JsonServer(count) as server:
        stores = stores_at(server.url)
        assert [stores._documents() for _ in range(4)] == [0, 7, 7, 9]
        server.stop()
        assert stores._documents() == 9  # the server gone: still the last count

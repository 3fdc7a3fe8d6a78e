"""The Elasticsearch count of the live view, against a stand-in HTTP server: a count that fails
(an error status, a timeout, the server gone) reads as the last one seen, never as 0; an alias
with no index behind it (404) is 0. The Cassandra count is tested against the real server
(tests/integration/test_pipeline_stores.py)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator

import pytest
from pipeline_stores import Stores

from fluxgate_stack import Endpoints


class Replies(http.server.BaseHTTPRequestHandler):
    script: list[tuple[int, dict[str, int]]] = []

    def do_GET(self) -> None:
        status, body = self.script.pop(0)
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[http.server.HTTPServer]:
    server = http.server.HTTPServer(("127.0.0.1", 0), Replies)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


def stores_at(url: str) -> Stores:
    endpoints = Endpoints(bootstrap="", registry_url="", mqtt_host="", mqtt_port=0, coap_url="",
                          elasticsearch_url=url, cassandra_host="", cassandra_port=0,
                          hazelcast_address="", hazelcast_cluster="")  # fmt: skip
    return Stores(endpoints)


def test_a_failed_count_reads_as_the_last_one_seen(server: http.server.HTTPServer) -> None:
    Replies.script = [(404, {}), (200, {"count": 7}), (503, {}), (200, {"count": 9})]
    stores = stores_at(f"http://127.0.0.1:{server.server_port}")
    assert [stores._documents() for _ in range(4)] == [0, 7, 7, 9]
    server.shutdown()
    server.server_close()
    assert stores._documents() == 9  # the server gone: still the last count

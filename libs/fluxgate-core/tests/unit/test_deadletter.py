from fluxgate_core.deadletter import MAX_REASON_BYTES, dead_letter_headers


def test_headers_explain_the_rejection() -> None:
    headers = dict(
        dead_letter_headers(reason="not JSON", error_class="PayloadError", source="a/b", service="mqtt", now_ms=5)
    )
    assert headers == {
        "fluxgate.dlq.reason": b"not JSON",
        "fluxgate.dlq.error.class": b"PayloadError",
        "fluxgate.dlq.source": b"a/b",
        "fluxgate.dlq.service": b"mqtt",
        "fluxgate.dlq.timestamp": b"5",
    }


def test_long_reasons_are_truncated() -> None:
    headers = dict(dead_letter_headers(reason="x" * 10_000, error_class="E", source="s", service="v"))
    assert len(headers["fluxgate.dlq.reason"]) == MAX_REASON_BYTES

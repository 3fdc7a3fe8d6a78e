from __future__ import annotations

import pytest
from pydantic import ValidationError

from fluxgate_mqtt_proxy.route_settings import RouteSettings
from fluxgate_mqtt_proxy.topic_routes import compile_routes, route_for


def rule(**fields: object) -> RouteSettings:
    return RouteSettings(**fields)


def test_share_in_filter_or_from_settings_subscribes_shared_but_matches_bare() -> None:
    explicit, implicit = compile_routes([rule(filter="$share/a/x/+"), rule(filter="y/#")], share_group="b")
    assert (explicit.subscription, implicit.subscription) == ("$share/a/x/+", "$share/b/y/#")
    assert explicit.match("x/1") and implicit.match("y/1/2")
    assert not explicit.match("$share/a/x/1")


def test_plain_subscription_without_share_group() -> None:
    (route,) = compile_routes([rule(filter="sensors/+/+")])
    assert route.subscription == "sensors/+/+"
    assert route.name == "sensors/+/+"


def test_device_and_metric_from_topic_levels_or_constants() -> None:
    (route,) = compile_routes([rule(filter="site/+/dev/+", device_from="topic:3", metric_from="const:lux")])
    assert route.device_from_topic("site/7/dev/d-42") == "d-42"
    assert route.metric_from_topic("site/7/dev/d-42") == "lux"


def test_metric_from_a_shared_filters_level() -> None:
    (route,) = compile_routes([rule(filter="$share/g/s/+/+", device_from="topic:1", metric_from="topic:2")])
    assert (route.device_from_topic("s/d1/humidity"), route.metric_from_topic("s/d1/humidity")) == ("d1", "humidity")


def test_payload_field_for_device_id() -> None:
    (route,) = compile_routes([rule(filter="x/#", device_from="payload:serial", fields={"time": "ts"})])
    assert (route.fields.device, route.fields.time) == ("serial", "ts")
    assert route.device_from_topic("x/1") is None
    assert route.metric_from_topic("x/1") is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"filter": "a/+", "device_from": "topic:2"}, "device_from: level 2 is beyond"),
        ({"filter": "a/#", "metric_from": "topic:1"}, "metric_from: level 1 is beyond"),
        ({"filter": "a/+", "device_from": "topic:x"}, "expected topic:N, payload or payload:<field>"),
        ({"filter": "a/+", "metric_from": "const:"}, "expected topic:N, payload or const:<name>"),
        ({"filter": "a/b#"}, "'#' must be the whole last level"),
    ],
)
def test_rules_are_validated_when_built(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        rule(**fields)


def test_first_matching_route_wins() -> None:
    routes = compile_routes([rule(filter="a/special", topic="t1"), rule(filter="a/+", topic="t2")])
    assert route_for(routes, "a/special").settings.topic == "t1"  # type: ignore[union-attr]
    assert route_for(routes, "a/other").settings.topic == "t2"  # type: ignore[union-attr]
    assert route_for(routes, "b") is None

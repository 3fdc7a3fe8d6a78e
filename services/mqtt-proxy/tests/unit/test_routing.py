import pytest

from fluxgate_core.errors import ConfigError
from fluxgate_mqtt_proxy.routing import compile_routes, matches, route_for, split_share, validate_filter
from fluxgate_mqtt_proxy.settings import RouteSettings


@pytest.mark.parametrize(
    ("topic_filter", "topic", "expected"),
    [
        ("sensors/+/temperature", "sensors/d1/temperature", True),
        ("sensors/+/temperature", "sensors/d1/humidity", False),
        ("sensors/+/temperature", "sensors/d1/temperature/x", False),
        ("sensors/#", "sensors", True),
        ("sensors/#", "sensors/a/b/c", True),
        ("sensors/+", "sensors/", True),
        ("+/+", "a/b", True),
        ("#", "$SYS/broker/uptime", False),
        ("+/broker/uptime", "$SYS/broker/uptime", False),
        ("$SYS/#", "$SYS/broker/uptime", True),
        ("a/b", "a/b", True),
        ("a/b", "a/c", False),
    ],
)
def test_mqtt_matching_rules(topic_filter: str, topic: str, expected: bool) -> None:
    assert matches(validate_filter(topic_filter), topic) is expected


@pytest.mark.parametrize("bad", ["a/#/b", "a/b#", "a/+b", "sport+"])
def test_invalid_wildcards_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="must be a whole"):
        validate_filter(bad)


def test_shared_subscription_filters() -> None:
    assert split_share("$share/g1/sensors/+/+") == ("g1", "sensors/+/+")
    assert split_share("sensors/#") == (None, "sensors/#")
    with pytest.raises(ValueError, match=r"\$share/<group>/<filter>"):
        split_share("$share/onlygroup")


def test_share_in_filter_or_from_settings_subscribes_shared_but_matches_bare() -> None:
    explicit, implicit = compile_routes(
        [RouteSettings(filter="$share/a/x/+"), RouteSettings(filter="y/#")], share_group="b"
    )
    assert (explicit.subscription, implicit.subscription) == ("$share/a/x/+", "$share/b/y/#")
    assert explicit.match("x/1") and implicit.match("y/1/2")


def test_device_and_metric_from_topic_levels_or_constants() -> None:
    (route,) = compile_routes([RouteSettings(filter="site/+/dev/+", device_from="topic:3", metric_from="const:lux")])
    assert route.device_from_topic("site/7/dev/d-42") == "d-42"
    assert route.metric_from_topic("site/7/dev/d-42") == "lux"


def test_payload_field_for_device_id() -> None:
    (route,) = compile_routes([RouteSettings(filter="x/#", device_from="payload:serial")])
    assert route.fields.device == "serial"
    assert route.device_from_topic("x/1") is None


@pytest.mark.parametrize(
    ("route", "message"),
    [
        (RouteSettings(filter="a/+", device_from="topic:2"), r"routes\[0\]\.device_from .*level 2 is beyond"),
        (RouteSettings(filter="a/#", metric_from="topic:1"), r"routes\[0\]\.metric_from .*beyond"),
        (RouteSettings(filter="a/+", device_from="topic:x"), r"needs a level number"),
        (RouteSettings(filter="a/b#"), r"routes\[0\]\.filter \[env FLUXGATE_MQTT_ROUTES\]"),
    ],
)
def test_route_errors_name_the_route_and_field(route: RouteSettings, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        compile_routes([route])


def test_first_matching_route_wins() -> None:
    routes = compile_routes([RouteSettings(filter="a/special", topic="t1"), RouteSettings(filter="a/+", topic="t2")])
    assert route_for(routes, "a/special").settings.topic == "t1"  # type: ignore[union-attr]
    assert route_for(routes, "a/other").settings.topic == "t2"  # type: ignore[union-attr]
    assert route_for(routes, "b") is None

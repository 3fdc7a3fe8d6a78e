from __future__ import annotations

import pytest

from fluxgate_mqtt_proxy.topics import filter_levels, matches, shared, split_share, topic_level


@pytest.mark.parametrize(
    ("topic_filter", "topic", "expected"),
    [
        ("sensors/+/temperature", "sensors/dev-1/temperature", True),
        ("sensors/+/temperature", "sensors/dev-1/humidity", False),
        ("sensors/+/temperature", "sensors/temperature", False),
        ("sensors/+/temperature", "sensors/a/b/temperature", False),
        ("sensors/+", "sensors/", True),  # an empty level is a level
        ("sensors/#", "sensors", True),  # '#' also matches the parent level
        ("sensors/#", "sensors/a/b/c", True),
        ("sensors/#", "other/a", False),
        ("#", "anything/at/all", True),
        ("+/+", "a/b", True),
        ("+/+", "a/b/c", False),
        ("#", "$SYS/broker/uptime", False),  # '$' topics never match a leading wildcard
        ("+/broker/uptime", "$SYS/broker/uptime", False),
        ("$SYS/#", "$SYS/broker/uptime", True),
        ("a/b", "a/b", True),
        ("a/b", "a/b/", False),
    ],
)
def test_matching(topic_filter: str, topic: str, expected: bool) -> None:
    assert matches(filter_levels(topic_filter), topic) is expected


@pytest.mark.parametrize("bad", ["a/#/b", "a/b#", "a+/b", "a/+b", "", "a/\x00"])
def test_invalid_filters_are_rejected(bad: str) -> None:
    with pytest.raises(ValueError):
        filter_levels(bad)


def test_share_prefix_is_split_from_the_filter() -> None:
    assert split_share("$share/proxies/sensors/+/+") == ("proxies", "sensors/+/+")
    assert split_share("sensors/+/+") == (None, "sensors/+/+")


def test_shared_filter_matches_without_its_prefix() -> None:
    group, bare = split_share("$share/g/sensors/+/temperature")
    assert group == "g"
    assert matches(filter_levels(bare), "sensors/d1/temperature")
    assert not matches(filter_levels("$share/g/sensors/+/temperature"), "sensors/d1/temperature")


@pytest.mark.parametrize("bad", ["$share/", "$share/g", "$share//a", "$share/g+/a", "$share/#/a"])
def test_malformed_share_is_rejected(bad: str) -> None:
    with pytest.raises(ValueError, match=r"\$share/<group>/<filter>"):
        split_share(bad)


def test_shared_subscription_is_built_from_group() -> None:
    assert shared("a/+", "g") == "$share/g/a/+"
    assert shared("a/+", None) == "a/+"


def test_topic_level() -> None:
    assert topic_level("sensors/dev-1/temperature", 1) == "dev-1"
    assert topic_level("sensors/dev-1", 2) is None
    assert topic_level("sensors//temperature", 1) is None

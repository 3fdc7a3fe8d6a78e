import pytest

from fluxgate_core.errors import ConfigError
from fluxgate_core.settings import load_settings
from fluxgate_mqtt_proxy.service import MqttProxy
from fluxgate_mqtt_proxy.settings import ProxySettings


def test_defaults_work_with_the_local_stack_and_simulator() -> None:
    settings = load_settings(ProxySettings)
    assert (settings.mqtt.host, settings.mqtt.port, settings.http.port) == ("127.0.0.1", 1883, 9101)
    assert settings.mqtt.clean_start is False and settings.mqtt.session_expiry_s > 0
    assert [route.filter for route in settings.routes] == ["sensors/+/+", "devices/+/senml"]


def test_routes_and_nested_settings_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUXGATE_MQTT_ROUTES", '[{"filter":"a/+/t","device_from":"topic:1","qos":2}]')
    monkeypatch.setenv("FLUXGATE_MQTT_MQTT__SHARE_GROUP", "proxies")
    monkeypatch.setenv("FLUXGATE_MQTT_MQTT__PASSWORD", "s3cret")
    settings = load_settings(ProxySettings)
    proxy = MqttProxy(settings)
    assert [route.subscription for route in proxy.routes] == ["$share/proxies/a/+/t"]
    assert settings.routes[0].qos == 2
    assert "s3cret" not in repr(settings)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("FLUXGATE_MQTT_ROUTES", '[{"filter":"a","qos":3}]', r"routes\.0\.qos \[env FLUXGATE_MQTT_ROUTES\]"),
        ("FLUXGATE_MQTT_ROUTES", '[{"filter":"a","device_from":"header"}]', r"routes\.0\.device_from"),
        ("FLUXGATE_MQTT_ROUTES", "[]", r"routes \[env FLUXGATE_MQTT_ROUTES\]"),
        ("FLUXGATE_MQTT_MQTT__PROTOCOL_VERSION", "3", r"FLUXGATE_MQTT_MQTT__PROTOCOL_VERSION"),
        ("FLUXGATE_MQTT_MAX_IN_FLIGHT", "0", r"max_in_flight \[env FLUXGATE_MQTT_MAX_IN_FLIGHT\]"),
    ],
)
def test_bad_settings_name_the_variable(monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=message):
        load_settings(ProxySettings)


def test_route_level_errors_surface_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUXGATE_MQTT_ROUTES", '[{"filter":"a/+","device_from":"topic:5"}]')
    with pytest.raises(ConfigError, match=r"routes\[0\]\.device_from"):
        MqttProxy(load_settings(ProxySettings))

"""A refusal found where the service's prefix is unknown is said with the service's variables."""

from __future__ import annotations

from fluxgate_core.errors import ConfigError, SettingRefused, env_variable


def test_named_says_every_setting_and_its_variable() -> None:
    refused = SettingRefused("the server said no", ("store.username", "store.password_file"))

    named = refused.named("fluxgate_x_")

    assert isinstance(named, ConfigError) and not isinstance(named, SettingRefused)
    assert str(named) == (
        "store.username / store.password_file [env FLUXGATE_X_STORE__USERNAME, FLUXGATE_X_STORE__PASSWORD_FILE]: "
        "the server said no"
    )


def test_a_nested_setting_joins_its_groups_with_double_underscores() -> None:
    assert env_variable("FLUXGATE_HZ_", "hazelcast.cluster_name") == "FLUXGATE_HZ_HAZELCAST__CLUSTER_NAME"

"""Secret file settings in the charts (``secrets.files``): each ``..._FILE`` setting whose
secret sibling the Settings may read from a file instead (``KAFKA__SASL_PASSWORD_FILE``,
``REGISTRY__BASIC_AUTH_USER_INFO_FILE``, a store's ``PASSWORD_FILE``) takes a Secret's key,
which the chart projects into a read-only volume as a file and points the setting at. The
schema offers exactly those settings, read from the Settings classes; the rendered pod's
environment, with the files as the kubelet would write them, is loaded by the service's own
Settings, which read the secret from the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from charts import SERVICES, UMBRELLA, ChartError, render
from fluxgate_testing import specs
from fluxgate_testing.k8s import Pod, pods, spark_driver
from pydantic import BaseModel
from pydantic_settings import BaseSettings
from settings_reference import SERVICES as SETTINGS

ROOT = Path(__file__).resolve().parents[2]
MOUNT = "/var/run/secrets/fluxgate"
KUBERNETES = "1.37.0"
SASL = {"securityProtocol": "SASL_PLAINTEXT", "saslMechanism": "SCRAM-SHA-512", "saslUsername": "fluxgate"}
SECRETS = {("fluxgate-secrets", "kafka-sasl-password"): "kafka-pw", ("es-user", "password"): "es-pw",
           ("fluxgate-secrets", "registry-basic-auth"): "fluxgate:registry-pw"}  # fmt: skip


def file_settings(cls: type[BaseSettings]) -> set[str]:
    """Every ``<secret>_FILE`` setting beside a secret one, read here from the fields' names
    and types, apart from the generator's own reading."""
    secrets = specs.secret_env_names(cls)

    def walk(model: type[BaseModel], path: str) -> set[str]:
        names: set[str] = set()
        for name, field in model.model_fields.items():
            variable = f"{path}{name}".upper()
            if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
                names |= walk(field.annotation, variable + "__")
            elif variable.endswith("_FILE") and variable.removesuffix("_FILE") in secrets:
                names.add(variable)
        return names

    return walk(cls, str(cls.model_config["env_prefix"]))


@pytest.mark.parametrize("chart", SERVICES)
def test_the_schema_offers_exactly_the_secret_file_settings(chart: str) -> None:
    schema = json.loads((ROOT / "deploy/charts" / chart / "values.schema.json").read_text())
    files = schema["properties"]["secrets"]["properties"]["files"]
    assert files["additionalProperties"] is False
    assert set(files["properties"]) == file_settings(SETTINGS[chart])
    prefix = SETTINGS[chart].model_config["env_prefix"]
    assert f"{prefix}KAFKA__SASL_PASSWORD_FILE" in files["properties"]


def files_on_disk(pod: Pod, root: Path) -> dict[str, Path]:
    """The pod's projected secret-files volume written out as the kubelet would: mount -> folder."""
    [mount] = [m for m in pod.container["volumeMounts"] if m["name"] == "secret-files"]
    assert mount["mountPath"] == MOUNT and mount["readOnly"] is True
    spec = pod.workload["spec"]["template"]["spec"] if "template" in pod.workload["spec"] else pod.workload["spec"]
    [volume] = [v for v in spec["volumes"] if v["name"] == "secret-files"]
    root.mkdir(parents=True, exist_ok=True)
    for source in volume["projected"]["sources"]:
        for item in source["secret"]["items"]:
            (root / item["path"]).write_text(SECRETS[(source["secret"]["name"], item["key"])] + "\n")
    return {MOUNT: root}


def local_env(pod: Pod, objects: list[dict[str, Any]], folders: dict[str, Path]) -> dict[str, str]:
    env = pod.env(objects, SECRETS)
    for name, value in env.items():
        for mount, folder in folders.items():
            if value.startswith(mount + "/"):
                env[name] = str(folder) + value[len(mount) :]
    return env


@pytest.mark.downloads
def test_a_persister_reads_its_passwords_from_the_mounted_files(
    built_charts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = {
        "global": {"existingSecret": "fluxgate-secrets", "kafka": SASL},
        "config": {"FLUXGATE_ES_ELASTICSEARCH__USERNAME": "elastic"},
        "secrets": {"files": {"FLUXGATE_ES_KAFKA__SASL_PASSWORD_FILE": "kafka-sasl-password",
                              "FLUXGATE_ES_ELASTICSEARCH__PASSWORD_FILE": {"secret": "es-user", "key": "password"},
                              "FLUXGATE_ES_REGISTRY__BASIC_AUTH_USER_INFO_FILE": "registry-basic-auth"}},
    }  # fmt: skip
    objects = render(built_charts / "es-persister", values=[values])
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES, strict=True)
    [pod] = pods(objects)
    env = pod.env(objects, SECRETS)
    for name in values["secrets"]["files"]:
        assert env[name] == f"{MOUNT}/{name}", name
        assert name.removesuffix("_FILE") not in env, f"{name}: its secret sibling is not also given"
    settings = specs.load_with_env(SETTINGS["es-persister"], local_env(pod, objects, files_on_disk(pod, tmp_path)),
                                   monkeypatch)  # fmt: skip
    assert settings.kafka.password() == "kafka-pw"
    assert settings.registry.user_info() == "fluxgate:registry-pw"
    assert settings.elasticsearch.basic_auth() == ("elastic", "es-pw")


@pytest.mark.downloads
def test_the_umbrella_mounts_them_for_a_statefulset_and_the_spark_driver_and_executors(
    built_charts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {"FLUXGATE_STATUS_KAFKA__SASL_PASSWORD_FILE": "kafka-sasl-password"}
    spark = {"mode": "sparkApplication", "sparkApplication": {"image": "registry.example/aggregator-spark:0.1.0"},
             "secrets": {"files": {"FLUXGATE_AGG_KAFKA__SASL_PASSWORD_FILE": "kafka-sasl-password"}}}  # fmt: skip
    values = [built_charts / UMBRELLA / "values-dev.yaml",
              {"global": {"existingSecret": "fluxgate-secrets", "kafka": SASL},
               "device-status": {"secrets": {"files": files}}, "aggregator": spark}]  # fmt: skip
    objects = render(built_charts / UMBRELLA, values=values)
    [status] = [p for p in pods(objects) if p.workload["kind"] == "StatefulSet" and "device-status" in p.name]
    env = local_env(status, objects, files_on_disk(status, tmp_path / "status"))
    settings = specs.load_with_env(SETTINGS["device-status"], env, monkeypatch)
    assert settings.kafka.password() == "kafka-pw"
    [app] = [obj for obj in objects if obj["kind"] == "SparkApplication"]
    [volume] = [v for v in app["spec"]["volumes"] if v["name"] == "secret-files"]
    for role in ("driver", "executor"):
        assert {"name": "secret-files", "mountPath": MOUNT, "readOnly": True} in app["spec"][role]["volumeMounts"]
    driver = spark_driver(app)
    assert driver.env(objects, SECRETS)["FLUXGATE_AGG_KAFKA__SASL_PASSWORD_FILE"].startswith(MOUNT + "/")
    assert volume["projected"]["sources"][0]["secret"]["name"] == "fluxgate-secrets"


REFUSED = {
    "a file setting that is no secret's": ({"secrets": {"files": {"FLUXGATE_ES_REGISTRY__CA_FILE": "ca"}}},
                                           "additional properties 'FLUXGATE_ES_REGISTRY__CA_FILE' not allowed"),
    "a secret's own name": ({"secrets": {"files": {"FLUXGATE_ES_KAFKA__SASL_PASSWORD": "pw"}}},
                            "additional properties 'FLUXGATE_ES_KAFKA__SASL_PASSWORD' not allowed"),
    "a file set both ways": ({"global": {"existingSecret": "s"},
                              "config": {"FLUXGATE_ES_KAFKA__SASL_PASSWORD_FILE": "/etc/pw"},
                              "secrets": {"files": {"FLUXGATE_ES_KAFKA__SASL_PASSWORD_FILE": "pw"}}},
                             "config.FLUXGATE_ES_KAFKA__SASL_PASSWORD_FILE: also under secrets.files"),
    "a file without a Secret": ({"secrets": {"files": {"FLUXGATE_ES_KAFKA__SASL_PASSWORD_FILE": "pw"}}},
                                "secrets.files.FLUXGATE_ES_KAFKA__SASL_PASSWORD_FILE: no Secret"),
}  # fmt: skip


@pytest.mark.downloads
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_chart_refuses_a_file_setting_it_cannot_mount(case: str, built_charts: Path) -> None:
    values, message = REFUSED[case]
    with pytest.raises(ChartError) as refused:
        render(built_charts / "es-persister", values=[values])
    assert message in str(refused.value)


@pytest.mark.downloads
def test_the_umbrella_console_reads_a_stores_password_from_the_file_its_persister_does(
    built_charts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    es = {
        "config": {"FLUXGATE_ES_ELASTICSEARCH__USERNAME": "elastic"},
        "secrets": {"files": {"FLUXGATE_ES_ELASTICSEARCH__PASSWORD_FILE": {"secret": "es-user", "key": "password"}}},
    }
    values = [built_charts / UMBRELLA / "values-dev.yaml",
              {"global": {"existingSecret": "fluxgate-secrets"}, "es-persister": es}]  # fmt: skip
    objects = render(built_charts / UMBRELLA, values=values)
    [console] = [p for p in pods(objects) if p.argv == ["fluxgate-console"]]
    env = local_env(console, objects, files_on_disk(console, tmp_path))
    assert "FLUXGATE_CONSOLE_ELASTICSEARCH__PASSWORD" not in env
    settings = specs.load_with_env(SETTINGS["console"], env, monkeypatch)
    assert settings.elasticsearch.basic_auth() == ("elastic", "es-pw")

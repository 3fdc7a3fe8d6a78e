"""Installing the charts as a team would, without a cluster: each chart's values.schema.json
refuses a misspelled setting (helm's own schema check, naming it) and accepts every values
file the repository ships; each chart's NOTES say where its Service answers /readyz, /healthz
and /metrics, as rendered by ``helm install --dry-run=client``; every chart packages into a
versioned archive that lints."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from charts import LIBRARY, SERVICES, UMBRELLA, ChartError, install_dry_run, lint, package, render, version

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "deploy/charts/fluxgate/examples").glob("*.yaml"))
SERVICE = "mqtt-proxy"

# (chart, values, the name helm's schema error gives): a misspelling where each kind of value lives.
MISSPELLED: dict[str, tuple[str, dict[str, Any], str]] = {
    "a service's setting": ("es-persister", {"config": {"FLUXGATE_ES_ELASTICSEARCH__HOST": "x"}},
                            "additional properties 'FLUXGATE_ES_ELASTICSEARCH__HOST' not allowed"),
    "a setting in the umbrella": (UMBRELLA, {"device-status": {"config": {"FLUXGATE_STATUS_STATUS__APPID": "x"}}},
                                  "additional properties 'FLUXGATE_STATUS_STATUS__APPID' not allowed"),
    "a secret setting": ("scylla-persister", {"secrets": {"keys": {"FLUXGATE_SCYLLA_SCYLLA__PASWORD": "pw"}}},
                         "additional properties 'FLUXGATE_SCYLLA_SCYLLA__PASWORD' not allowed"),
    "a global connection setting": (UMBRELLA, {"global": {"kafka": {"bootstrapServer": "k:9092"}}},
                                    "additional properties 'bootstrapServer' not allowed"),
    "a chart of the umbrella": (UMBRELLA, {"es-persistor": {"enabled": False}},
                                "additional properties 'es-persistor' not allowed"),
    "a block of the umbrella": (UMBRELLA, {"alerts": {"enable": True}}, "additional properties 'enable' not allowed"),
    "a number that is not one": ("es-persister", {"config": {"FLUXGATE_ES_SINK__BATCH_SIZE": "many"}},
                                 "FLUXGATE_ES_SINK__BATCH_SIZE"),
    "a choice that is none": (SERVICE, {"config": {"FLUXGATE_MQTT_LOG__LEVEL": "LOUD"}}, "FLUXGATE_MQTT_LOG__LEVEL"),
    "a secret as a plain value": ("es-persister", {"config": {"FLUXGATE_ES_ELASTICSEARCH__PASSWORD": "pw"}},
                                  "additional properties 'FLUXGATE_ES_ELASTICSEARCH__PASSWORD' not allowed"),
    "a chart's top-level key": ("es-persister", {"replicaCout": 2}, "additional properties 'replicaCout' not allowed"),
    "a chart's key in the umbrella": (UMBRELLA, {"device-status": {"replicaCout": 2}},
                                      "additional properties 'replicaCout' not allowed"),
    "a key of a block a chart defines": ("aggregator", {"checkpoint": {"existingClain": "c"}},
                                         "additional properties 'existingClain' not allowed"),
    "a probe's key": (SERVICE, {"probes": {"liveness": {"periodSecond": 5}}},
                      "additional properties 'periodSecond' not allowed"),
    "a topic's creation": (UMBRELLA, {"topicProvisioning": {"topics": {"t": {"partition": 6}}}},
                           "additional properties 'partition' not allowed"),
    "the topic Job's setting": (UMBRELLA, {"topicProvisioning": {"config": {"FLUXGATE_TOPICS_KAFKA__EXTRAS": "{}"}}},
                                "additional properties 'FLUXGATE_TOPICS_KAFKA__EXTRAS' not allowed"),
}  # fmt: skip


@pytest.mark.downloads
@pytest.mark.parametrize("case", sorted(MISSPELLED))
def test_a_misspelled_value_fails_at_the_schema_naming_it(case: str, built_charts: Path) -> None:
    chart, values, message = MISSPELLED[case]
    with pytest.raises(ChartError, match="values don't meet the specifications of the schema") as refused:
        render(built_charts / chart, values=[values])
    assert message in str(refused.value)


@pytest.mark.downloads
@pytest.mark.parametrize("chart", [SERVICE, UMBRELLA])
def test_helm_lint_fails_on_a_misspelled_top_level_key_naming_it(chart: str, built_charts: Path) -> None:
    values = {"replicaCout": 2} if chart == SERVICE else {"replicaCout": 2, "mqtt-proxy": {"replicaCout": 2}}
    result = lint(built_charts / chart, [values])
    assert result.returncode != 0
    assert "additional properties 'replicaCout' not allowed" in result.stdout + result.stderr


@pytest.mark.downloads
def test_what_helm_and_a_parent_chart_pass_down_is_allowed(built_charts: Path) -> None:
    """A parent's globals (its own keys too), the umbrella's switch, the library chart's block."""
    values = {"global": {"imageRegistry": "registry.example", "existingSecret": "s"}, "enabled": True,
              "fluxgate-lib": {}, "podSecurityContext": {"supplementalGroups": [10002]},
              "resources": {"limits": {"ephemeral-storage": "1Gi"}}}  # fmt: skip
    assert render(built_charts / SERVICE, values=[values])
    assert lint(built_charts / SERVICE, [values]).returncode == 0


@pytest.mark.downloads
@pytest.mark.parametrize("example", [None, *EXAMPLES], ids=lambda path: path.stem if path else "values-dev")
def test_every_shipped_values_file_passes_the_schemas(example: Path | None, built_charts: Path) -> None:
    dev = built_charts / UMBRELLA / "values-dev.yaml"
    assert render(built_charts / UMBRELLA, values=[dev, *([example] if example else [])])


@pytest.mark.downloads
def test_settings_as_yaml_numbers_booleans_and_lists_pass(built_charts: Path) -> None:
    config = {"FLUXGATE_ES_SINK__BATCH_SIZE": 500, "FLUXGATE_ES_ELASTICSEARCH__VERIFY_CERTS": False,
              "FLUXGATE_ES_ELASTICSEARCH__HOSTS": ["http://es:9200"], "FLUXGATE_ES_KAFKA__EXTRA": {"a.b": "1"},
              "FLUXGATE_ES_LOG__LEVEL": "DEBUG", "FLUXGATE_ES_SINK__MAX_BATCH_AGE_S": "0.5"}  # fmt: skip
    config = {key: value for key, value in config.items() if known(built_charts / "es-persister", key)}
    assert len(config) >= 5
    assert render(built_charts / "es-persister", values=[{"config": config}])


def known(chart: Path, variable: str) -> bool:
    schema = yaml.safe_load((chart / "values.schema.json").read_text())
    return variable in schema["properties"]["config"]["properties"]


def services_in(manifest: str) -> dict[str, list[int]]:
    """Each rendered Service's name and ports."""
    objects = [doc for doc in yaml.safe_load_all(manifest) if doc and doc.get("kind") == "Service"]
    return {obj["metadata"]["name"]: [port["port"] for port in obj["spec"]["ports"]] for obj in objects}


@pytest.mark.downloads
@pytest.mark.parametrize("chart", SERVICES)
def test_notes_say_where_the_service_answers_and_how_to_check_it_is_ready(chart: str, built_charts: Path) -> None:
    values = yaml.safe_load((built_charts / chart / "values.yaml").read_text())
    installed = install_dry_run(built_charts / chart, release="demo", namespace="iot")
    notes, port = installed.notes, values["httpPort"]
    forwarded = re.findall(r"kubectl -n iot port-forward svc/(\S+) ([\d ]+)", notes)
    assert forwarded, notes
    services = services_in(installed.manifest)
    for service, ports in forwarded:
        assert {int(p) for p in ports.split()} <= set(services[service]), f"{service} {ports}: {services}"
    for path in ("/readyz", "/healthz", "/metrics"):
        assert f"http://127.0.0.1:{port}{path}" in notes or path in notes, path
    assert f"curl -s http://127.0.0.1:{port}/readyz" in notes
    assert "kubectl -n iot wait pod -l app.kubernetes.io/instance=demo,app.kubernetes.io/name=" in notes
    assert values["envPrefix"] in notes


@pytest.mark.downloads
def test_the_umbrellas_notes_list_every_enabled_service_at_its_service(built_charts: Path) -> None:
    off = {"coap-ingest": {"enabled": False}}
    installed = install_dry_run(built_charts / UMBRELLA, values=[built_charts / UMBRELLA / "values-dev.yaml", off])
    services = services_in(installed.manifest)
    listed = dict(re.findall(r"^  ([\w-]+): +http://(\S+)$", installed.notes, flags=re.M))
    assert set(listed) == set(SERVICES) - {"coap-ingest"}, installed.notes
    for chart, url in listed.items():
        host, port = url.rsplit(":", 1)
        name = host.removesuffix(".fluxgate.svc")
        assert int(port) in services[name], f"{chart}: {url}"
    assert "kubectl -n fluxgate port-forward svc/fluxgate-console 9108" in installed.notes
    assert "kubectl -n fluxgate wait pod -l app.kubernetes.io/instance=fluxgate" in installed.notes


@pytest.fixture(scope="module")
def packaged(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return package(tmp_path_factory.mktemp("packaged"))


@pytest.mark.downloads
def test_every_chart_packages_into_an_archive_named_by_its_version(packaged: list[Path]) -> None:
    charts = [LIBRARY, *SERVICES, UMBRELLA]
    assert [path.name for path in packaged] == [f"{c}-{version(ROOT / 'deploy/charts' / c)}.tgz" for c in charts]
    for archive, chart in zip(packaged, charts, strict=True):
        with tarfile.open(archive) as tar:
            names = tar.getnames()
            meta = yaml.safe_load(tar.extractfile(f"{chart}/Chart.yaml").read())  # type: ignore[union-attr]
        assert meta["version"] == version(ROOT / "deploy/charts" / chart)
        assert f"{chart}/values.schema.json" in names
        if chart != LIBRARY:
            assert f"{chart}/templates/NOTES.txt" in names
            assert any(name.startswith(f"{chart}/charts/") for name in names), f"{chart}: no dependency inside"


@pytest.mark.downloads
@pytest.mark.parametrize("index", range(len(SERVICES) + 2))
def test_every_packaged_chart_lints(index: int, packaged: list[Path]) -> None:
    archive = packaged[index]
    values = [ROOT / "deploy/charts/fluxgate/values-dev.yaml"] if archive.name.startswith(f"{UMBRELLA}-0") else []
    result = lint(archive, values)
    assert result.returncode == 0, result.stdout + result.stderr


def test_each_dependency_is_asked_for_at_the_version_its_chart_has() -> None:
    """A chart's version bumped without its dependants (or the reverse) would not build."""
    for chart_yaml in sorted((ROOT / "deploy/charts").glob("*/Chart.yaml")):
        for dependency in yaml.safe_load(chart_yaml.read_text()).get("dependencies", []):
            folder = (chart_yaml.parent / dependency["repository"].removeprefix("file://")).resolve()
            assert dependency["version"] == version(folder), f"{chart_yaml}: {dependency['name']}"

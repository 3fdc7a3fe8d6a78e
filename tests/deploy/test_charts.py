"""The Helm charts, checked without a cluster: lint, render, every object valid against
the Kubernetes schemas (strict: unknown fields fail) and the operators' CRDs, every
environment name a field of the service's Settings and every value accepted by it, the
image's command its Dockerfile's entry point, the pods hardened, each service's scaling
rules enforced, and the Dockerfiles hadolint-clean.

Every test that needs helm (built from the Go module proxy) or the operators' CRDs (read from
their Go modules) is marked ``downloads``, which ``make test-unit`` leaves out; hadolint is a
wheel in the venv, so its test and the Secret check need no network and stay unmarked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from charts import SERVICES, UMBRELLA, ChartError, lint, render
from fluxgate_testing import specs
from fluxgate_testing.k8s import Pod, pods, spark_driver
from pydantic import SecretStr

from fluxgate_core.store_access import ElasticsearchAccess, HazelcastAccess, ScyllaAccess
from fluxgate_sink.kcql import parse

ROOT = Path(__file__).resolve().parents[2]
TLS_FILES = {"ca_certs", "tls_ca_file", "ssl_cafile", "ssl_certfile", "ssl_keyfile"}
KUBERNETES = "1.37.0"  # the newest schemas kubernetes-validate ships
EXAMPLES = sorted((ROOT / "deploy/charts/fluxgate/examples").glob("*.yaml"))
EVERYTHING_ON: dict[str, Any] = {
    "global": {"existingSecret": "fluxgate-secrets"},
    "alerts": {"enabled": True, "labels": {"release": "prometheus"}, "runbookBaseUrl": "https://runbooks.example/"},
    **{name: {"podMonitor": {"enabled": True}} for name in SERVICES},
    "mqtt-proxy": {"replicaCount": 2, "podMonitor": {"enabled": True}},
    "coap-ingest": {"replicaCount": 2, "podMonitor": {"enabled": True}},
    "device-status": {"autoscaling": {"enabled": True}, "standbyReplicas": 1, "podMonitor": {"enabled": True}},
    **{name: {"autoscaling": {"enabled": True}, "podMonitor": {"enabled": True}}
       for name in ("es-persister", "scylla-persister", "hazelcast-persister")},
    "aggregator": {"mode": "sparkApplication", "podMonitor": {"enabled": True},
                   "sparkApplication": {"image": "registry.example/fluxgate/aggregator-spark:0.1.0"}},
}  # fmt: skip
SPARK_ON_OBJECT_STORE = {"aggregator": {"checkpoint": {"url": "s3a://fluxgate/checkpoints/aggregator"}}}
# (chart, values files and dicts) pairs: "<dev>" is the umbrella's values-dev.yaml
CASES: dict[str, tuple[str, list[Any]]] = {
    **{name: (name, []) for name in SERVICES},
    "umbrella": (UMBRELLA, []),
    "umbrella-dev": (UMBRELLA, ["<dev>"]),
    **{f"umbrella-dev-{path.stem}": (UMBRELLA, ["<dev>", path]) for path in EXAMPLES},
    "umbrella-everything-on": (UMBRELLA, ["<dev>", EVERYTHING_ON]),
    "umbrella-checkpoint-url": (UMBRELLA, ["<dev>", SPARK_ON_OBJECT_STORE]),
}
# Stores behind TLS and credentials, each Secret given its own way (ECK's example for Elasticsearch):
# a persister's existingSecret, a {secret, key}, the global Secret; certificates on volumes.
STORES_TLS: dict[str, Any] = {
    "scylla-persister": {
        "config": {"FLUXGATE_SCYLLA_SCYLLA__USERNAME": "fluxgate",
                   "FLUXGATE_SCYLLA_SCYLLA__TLS_CA_FILE": "/etc/fluxgate/scylla-ca/ca.crt",
                   "FLUXGATE_SCYLLA_SCYLLA__TLS_CHECK_HOSTNAME": "false"},
        "secrets": {"existingSecret": "scylla-auth"},
        "extraVolumes": [{"name": "ca", "secret": {"secretName": "scylla-ca"}}],
        "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/fluxgate/scylla-ca", "readOnly": True}],
    },
    "hazelcast-persister": {
        "config": {"FLUXGATE_HZ_HAZELCAST__USERNAME": "fluxgate", "FLUXGATE_HZ_HAZELCAST__SSL_ENABLED": "true",
                   "FLUXGATE_HZ_HAZELCAST__SSL_CAFILE": "/etc/fluxgate/hz-tls/ca.crt",
                   "FLUXGATE_HZ_HAZELCAST__SSL_CERTFILE": "/etc/fluxgate/hz-tls/tls.crt",
                   "FLUXGATE_HZ_HAZELCAST__SSL_KEYFILE": "/etc/fluxgate/hz-tls/tls.key"},
        "secrets": {"keys": {"FLUXGATE_HZ_HAZELCAST__PASSWORD": "hz-password",  # a key of the global Secret
                             "FLUXGATE_HZ_HAZELCAST__SSL_PASSWORD": {"secret": "hz-client-key", "key": "passphrase"}}},
        "extraVolumes": [{"name": "ca", "secret": {"secretName": "hz-client-tls"}}, {"name": "spare", "emptyDir": {}}],
        "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/fluxgate/hz-tls", "readOnly": True},
                              {"name": "spare", "mountPath": "/var/spare"}],
    },
}  # fmt: skip
ECK = ROOT / "deploy/charts/fluxgate/examples/eck.yaml"
CASES["umbrella-stores-tls"] = (UMBRELLA, ["<dev>", ECK, STORES_TLS, {"global": EVERYTHING_ON["global"]}])
SECRETS = {("fluxgate-secrets", "kafka-sasl-password"): "s3cret", ("fluxgate-es-elastic-user", "elastic"): "s3cret",
           ("scylla-auth", "scylla-password"): "scylla-pw", ("fluxgate-secrets", "hz-password"): "hz-pw",
           ("hz-client-key", "passphrase"): "key-pw"}  # fmt: skip


def values_of(charts: Path, values: list[Any]) -> list[Any]:
    dev = charts / UMBRELLA / "values-dev.yaml"
    return [dev if item == "<dev>" else item for item in values]


@pytest.fixture(scope="module")
def rendered(built_charts: Path) -> dict[str, list[dict[str, Any]]]:
    return {case: render(built_charts / chart, values=values_of(built_charts, v)) for case, (chart, v) in CASES.items()}


@pytest.mark.downloads
@pytest.mark.parametrize("case", sorted(CASES))
def test_chart_lints(case: str, built_charts: Path) -> None:
    chart, values = CASES[case]
    result = lint(built_charts / chart, values_of(built_charts, values))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.downloads
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_object_is_valid_kubernetes(
    case: str, rendered: dict[str, list[dict[str, Any]]], crd_schemas: dict[tuple[str, str], Any]
) -> None:
    for obj in rendered[case]:
        where = f"{obj['kind']} {obj['metadata']['name']}"
        schema = crd_schemas.get((obj["apiVersion"], obj["kind"]))
        try:
            if schema is not None:
                jsonschema.validate(obj, schema)
            else:
                kubernetes_validate.validate(obj, KUBERNETES, strict=True)
        except jsonschema.ValidationError as error:
            pytest.fail(f"{where}: {error.message} at {'/'.join(map(str, error.absolute_path))}")


@pytest.mark.downloads
def test_custom_resources_are_all_checked(rendered: dict[str, list[dict[str, Any]]]) -> None:
    kinds = {obj["kind"] for obj in rendered["umbrella-everything-on"]}
    assert {"ScaledObject", "PodMonitor", "ServiceMonitor", "SparkApplication", "PrometheusRule"} <= kinds


@pytest.mark.downloads
def test_the_alerts_are_the_rules_file_with_runbooks_where_they_are_served(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    rules = yaml.safe_load((ROOT / "deploy/charts/fluxgate/files/prometheus-rules.yaml").read_text())
    [rule] = [obj for obj in rendered["umbrella-everything-on"] if obj["kind"] == "PrometheusRule"]
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    served = [r["annotations"]["runbook_url"] for group in rule["spec"]["groups"] for r in group["rules"]]
    in_file = [r["annotations"]["runbook_url"] for group in rules["groups"] for r in group["rules"]]
    assert served == [url.replace("docs/runbooks/", "https://runbooks.example/") for url in in_file]
    for group in rule["spec"]["groups"]:
        for r in group["rules"]:
            r["annotations"]["runbook_url"] = r["annotations"]["runbook_url"].replace(
                "https://runbooks.example/", "docs/runbooks/"
            )
    assert rule["spec"] == rules  # otherwise the same, Prometheus's own {{ $labels }} templates included
    assert not [obj for obj in rendered["umbrella-dev"] if obj["kind"] == "PrometheusRule"]  # off by default


@pytest.mark.downloads
def test_every_scrape_labels_its_series_with_the_service_the_alerts_name(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    monitors = [obj for obj in rendered["umbrella-everything-on"] if obj["kind"] in ("PodMonitor", "ServiceMonitor")]
    assert len(monitors) == len(SERVICES)  # the console among them
    for monitor in monitors:
        service = monitor["metadata"]["labels"]["app.kubernetes.io/name"]
        for endpoint in monitor["spec"].get("podMetricsEndpoints", monitor["spec"].get("endpoints")):
            assert {"targetLabel": "fluxgate_service", "replacement": service} in endpoint["relabelings"]


def settings_of(pod: Pod, env: dict[str, str]) -> type[Any]:
    prefixes = {"_".join(name.split("_")[:2]) + "_" for name in env if name.startswith("FLUXGATE_")}
    assert len(prefixes) == 1, f"{pod.name}: one settings prefix, got {prefixes}"
    return specs.settings_class(specs.folder_of_script(pod.argv[0]), prefixes.pop())


@pytest.mark.downloads
@pytest.mark.parametrize("case", sorted(CASES))
def test_env_names_are_settings_fields_and_values_validate(
    case: str, rendered: dict[str, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What catches a renamed setting or a wrong value statically: each pod's whole
    environment, as the kubelet would give it, loaded by the service's own Settings."""
    objects = rendered[case]
    for pod in pods(objects):
        env = pod.env(objects, SECRETS)
        cls = settings_of(pod, env)
        assert {name for name in env if not name.startswith("FLUXGATE_")} <= {"POD_NAME", "POD_NAMESPACE"}
        specs.assert_settings_fields(cls, env, f"{case}: {pod.name}")
        settings = specs.load_with_env(cls, env, monkeypatch)
        assert settings.http.port == pod.port, f"{pod.name}: serves on {settings.http.port}, the pod opens {pod.port}"


def chart_settings_class(name: str) -> type[Any]:
    """The Settings class of the service a chart runs (its values' command and envPrefix)."""
    values = yaml.safe_load((ROOT / "deploy/charts" / name / "values.yaml").read_text())
    return specs.settings_class(specs.folder_of_script(values["command"][0]), values["envPrefix"])


@pytest.mark.parametrize("name", SERVICES)
def test_secrets_are_exactly_the_settings_secrets(name: str) -> None:
    """Every SecretStr setting can come from a Secret, and nothing else is read from one."""
    values = yaml.safe_load((ROOT / "deploy/charts" / name / "values.yaml").read_text())
    assert set(values["secrets"]["keys"]) == specs.secret_env_names(chart_settings_class(name))


@pytest.mark.downloads
@pytest.mark.parametrize("name", SERVICES)
def test_command_is_the_dockerfiles_entry_point(name: str, rendered: dict[str, list[dict[str, Any]]]) -> None:
    [pod] = pods(rendered[name])
    dockerfile = specs.folder_of_script(pod.argv[0]) / "Dockerfile"
    [entrypoint] = specs.arguments(dockerfile, "ENTRYPOINT")
    cmd = specs.arguments(dockerfile, "CMD")
    assert pod.container["command"] == json.loads(entrypoint), dockerfile
    assert pod.container.get("args", []) == (json.loads(cmd[0]) if cmd else []), dockerfile
    assert specs.arguments(dockerfile, "EXPOSE") == [str(pod.port)], dockerfile


@pytest.mark.downloads
@pytest.mark.parametrize("case", ["umbrella-dev", "umbrella-everything-on"])
def test_pods_are_hardened_and_probed(case: str, rendered: dict[str, list[dict[str, Any]]]) -> None:
    objects = rendered[case]
    for pod in pods(objects):
        spec, context = pod.workload["spec"]["template"]["spec"], pod.container["securityContext"]
        assert spec["securityContext"]["runAsNonRoot"] and spec["securityContext"]["runAsUser"] == 10001
        assert context["readOnlyRootFilesystem"] and not context["allowPrivilegeEscalation"], pod.name
        assert context["capabilities"] == {"drop": ["ALL"]} and not context["privileged"], pod.name
        assert {"livenessProbe": "/healthz", "readinessProbe": "/readyz"}.items() <= pod.probe_paths().items()
        assert set(pod.container["resources"]) == {"requests", "limits"}, pod.name
        assert spec["topologySpreadConstraints"], pod.name
        selector = pod.workload["spec"]["selector"]["matchLabels"]
        budgets = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
        assert any(b["spec"]["selector"]["matchLabels"] == selector for b in budgets), f"{pod.name}: no PDB"


def env_of(objects: list[dict[str, Any]], workload: str, ordinal: int = 0) -> dict[str, str]:
    [pod] = [p for p in pods(objects) if p.workload["metadata"]["name"] == workload and p.ordinal == ordinal]
    return pod.env(objects, SECRETS)


@pytest.mark.downloads
def test_mqtt_replicas_share_one_subscription_with_client_ids_of_their_own(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    objects = rendered["umbrella-everything-on"]
    members = [env_of(objects, "fluxgate-mqtt-proxy", i) for i in (0, 1)]
    assert {env["FLUXGATE_MQTT_MQTT__SHARE_GROUP"] for env in members} == {"fluxgate-mqtt-proxy"}
    assert [env["FLUXGATE_MQTT_MQTT__CLIENT_ID"] for env in members] == [
        "fluxgate-mqtt-proxy-0",
        "fluxgate-mqtt-proxy-1",
    ]


@pytest.mark.downloads
def test_coap_members_split_the_resources_by_pod_index(rendered: dict[str, list[dict[str, Any]]]) -> None:
    objects = rendered["umbrella-everything-on"]
    members = [env_of(objects, "fluxgate-coap-ingest", i) for i in (0, 1)]
    assert [(env["FLUXGATE_COAP_MEMBER"], env["FLUXGATE_COAP_MEMBERS"]) for env in members] == [("0", "2"), ("1", "2")]


CONSUMERS = {"es-persister": "FLUXGATE_ES_", "scylla-persister": "FLUXGATE_SCYLLA_",
             "hazelcast-persister": "FLUXGATE_HZ_", "device-status": "FLUXGATE_STATUS_"}  # fmt: skip


@pytest.mark.downloads
def test_consumer_group_members_are_static_named_by_their_pod(
    rendered: dict[str, list[dict[str, Any]]], built_charts: Path
) -> None:
    """Each pod of a consumer group joins it as a static member named by the pod, unique per
    pod and kept by a restarted container; kafka.staticMembership: false turns it off, and
    one set under config wins over the pod's name."""
    objects = rendered["umbrella-everything-on"]
    for name, prefix in CONSUMERS.items():
        [pod] = [p for p in pods(objects) if p.workload["metadata"]["name"] == f"fluxgate-{name}"]
        assert pod.env(objects, SECRETS)[f"{prefix}KAFKA__GROUP_INSTANCE_ID"] == pod.name
        off = render(built_charts / name, values=[{"kafka": {"staticMembership": False}}])
        assert f"{prefix}KAFKA__GROUP_INSTANCE_ID" not in pods(off)[0].env(off, SECRETS)
        given = render(built_charts / name, values=[{"config": {f"{prefix}KAFKA__GROUP_INSTANCE_ID": "mine"}}])
        assert pods(given)[0].env(given, SECRETS)[f"{prefix}KAFKA__GROUP_INSTANCE_ID"] == "mine"


@pytest.mark.downloads
def test_lag_scalers_watch_each_group_on_its_topic(rendered: dict[str, list[dict[str, Any]]]) -> None:
    scalers = {o["spec"]["scaleTargetRef"]["name"]: o for o in rendered["umbrella-everything-on"]
               if o["kind"] == "ScaledObject"}  # fmt: skip
    triggers = {name: s["spec"]["triggers"][0]["metadata"] for name, s in scalers.items()}
    watched = {name: (trigger["consumerGroup"], trigger["topic"]) for name, trigger in triggers.items()}
    assert watched == {
        "fluxgate-es-persister": ("fluxgate-es-persister", "temperatures.aggregated"),
        "fluxgate-scylla-persister": ("fluxgate-scylla-persister", "temperatures.aggregated"),
        "fluxgate-hazelcast-persister": ("fluxgate-hazelcast-persister", "temperatures.aggregated"),
        "fluxgate-device-status": ("fluxgate-device-status", "sensors.readings"),
    }
    assert all(s["spec"]["maxReplicaCount"] <= 3 for s in scalers.values())
    workloads = {
        o["metadata"]["name"]: o
        for o in rendered["umbrella-everything-on"]
        if o["kind"] in ("Deployment", "StatefulSet")
    }
    assert all("replicas" not in workloads[name]["spec"] for name in scalers), "KEDA owns the replica count"


OWN_KCQL = {"autoscaling": {"enabled": True}, "global": {"kafka": {"bootstrapServers": "k:9092"}},
            "config": {"FLUXGATE_ES_SINK__GROUP_ID": "g2",
                       "FLUXGATE_ES_SINK__KCQL": "INSERT INTO t SELECT * FROM other.topic PK device_id"}}  # fmt: skip
BOTH_TOPICS = (
    "INSERT INTO t SELECT * FROM other.topic PK device_id; INSERT INTO u SELECT * FROM temperatures.aggregated"
)


@pytest.mark.downloads
@pytest.mark.parametrize("kcql", [None, BOTH_TOPICS])
def test_a_persisters_scaler_watches_what_its_settings_read(
    kcql: str | None, built_charts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group and the topics the pod's own Settings read (its KCQL), not the chart's
    kafka.topic default; every topic of the group when the KCQL reads several."""
    values = {**OWN_KCQL, "config": {**OWN_KCQL["config"], **({"FLUXGATE_ES_SINK__KCQL": kcql} if kcql else {})}}
    objects = render(built_charts / "es-persister", values=[values])
    [pod] = pods(objects)
    settings = specs.load_with_env(settings_of(pod, env := pod.env(objects, SECRETS)), env, monkeypatch)
    [trigger] = next(o for o in objects if o["kind"] == "ScaledObject")["spec"]["triggers"]
    topics = {statement.topic for statement in parse(settings.sink.kcql)}
    assert trigger["metadata"]["consumerGroup"] == settings.sink.group_id
    assert trigger["metadata"].get("topic") == (topics.pop() if len(topics) == 1 else None)


REFUSED = {
    "a scaler beyond the partitions": ("es-persister", {"autoscaling": {"enabled": True, "maxReplicas": 4},
                                                         "global": {"kafka": {"bootstrapServers": "k:9092"}}},
                                       "above kafka.partitions"),
    "two mqtt replicas without a share group": ("mqtt-proxy", {"replicaCount": 2, "shareGroup": ""},
                                                "needs shareGroup"),
    "two aggregators": ("aggregator", {"replicaCount": 2}, "replicaCount must be 1"),
    "a standby with no other instance": ("device-status", {"standbyReplicas": 1}, "needs more instances"),
    "a setting of another service": ("es-persister", {"config": {"FLUXGATE_HZ_SINK__KCQL": "x"}},
                                     "starts with FLUXGATE_ES_"),
    "a SparkApplication without its image": ("aggregator", {"mode": "sparkApplication"}, "sparkApplication.image"),
    "two consoles": ("console", {"replicaCount": 2}, "replicaCount must be 1"),
}  # fmt: skip


@pytest.mark.downloads
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_charts_refuse_what_would_break_a_service(case: str, built_charts: Path) -> None:
    chart, values, message = REFUSED[case]
    with pytest.raises(ChartError, match=message):
        render(built_charts / chart, values=[values])


@pytest.mark.downloads
def test_device_status_advertises_its_stable_dns_name(rendered: dict[str, list[dict[str, Any]]]) -> None:
    env = env_of(rendered["umbrella-dev"], "fluxgate-device-status")
    host = "fluxgate-device-status-0.fluxgate-device-status-headless.fluxgate.svc"
    assert env["FLUXGATE_STATUS_HTTP__ADVERTISED_HOST"] == host
    assert env["FLUXGATE_STATUS_STATUS__PARTITIONS"] == "3"
    assert env["FLUXGATE_STATUS_STATUS__STANDBY_REPLICAS"] == "0"
    standby = env_of(rendered["umbrella-everything-on"], "fluxgate-device-status")
    assert standby["FLUXGATE_STATUS_STATUS__STANDBY_REPLICAS"] == "1"


@pytest.mark.parametrize("dockerfile", sorted(str(f.relative_to(ROOT)) for f in ROOT.glob("services/**/Dockerfile")))
def test_dockerfile_passes_hadolint(dockerfile: str) -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    result = subprocess.run(
        [str(hadolint), "--no-color", "--failure-threshold", "info", dockerfile],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.downloads
def test_validation_refuses_unknown_fields(
    rendered: dict[str, list[dict[str, Any]]], crd_schemas: dict[tuple[str, str], Any]
) -> None:
    """The check above is strict: a misspelt field fails, in a built-in kind and in a custom resource."""
    objects = rendered["umbrella-everything-on"]
    [deployment] = [
        o for o in objects if o["metadata"]["name"] == "fluxgate-es-persister" and o["kind"] == "Deployment"
    ]
    deployment = json.loads(json.dumps(deployment))
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(jsonschema.ValidationError, match="readinesProbe"):
        kubernetes_validate.validate(deployment, KUBERNETES, strict=True)
    [scaler] = [json.loads(json.dumps(o)) for o in objects if o["kind"] == "ScaledObject"][:1]
    scaler["spec"]["maxReplicas"] = 3
    with pytest.raises(jsonschema.ValidationError, match="maxReplicas"):
        jsonschema.validate(scaler, crd_schemas[("keda.sh/v1alpha1", "ScaledObject")])


def console_settings(objects: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> Any:
    [pod] = [p for p in pods(objects) if p.argv == ["fluxgate-console"]]
    env = pod.env(objects, SECRETS)
    return specs.load_with_env(settings_of(pod, env), env, monkeypatch)


def served_at(objects: list[dict[str, Any]], url: str) -> tuple[str, int]:
    """The chart (app.kubernetes.io/name) of the rendered Service or StatefulSet pod a
    ``http://<host>.<namespace>.svc:<port>`` URL reaches, and the pod port behind it."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    name = host.removesuffix(".fluxgate.svc").split(".")
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    service = services[name[-1]]
    if len(name) == 2:  # <pod>.<headless Service>: one pod of its StatefulSet
        [workload] = [p.workload for p in pods(objects) if p.name == name[0]]
        assert workload["spec"]["serviceName"] == name[-1], url
    [served] = [p for p in service["spec"]["ports"] if p["port"] == int(port)]
    target = served["targetPort"]  # a pod's port named http, or a number where the pod's spec cannot name it
    return service["spec"]["selector"]["app.kubernetes.io/name"], int(port) if target == "http" else int(target)


def spark_drivers(objects: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[Pod, int]]:
    """Each SparkApplication's driver pod by chart, with the port its Settings serve on."""
    drivers = {}
    for app in [o for o in objects if o["kind"] == "SparkApplication"]:
        driver = spark_driver(app)
        name = driver.workload["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"]
        settings = specs.load_with_env(chart_settings_class(name), driver.env(objects, SECRETS), monkeypatch)
        drivers[name] = (driver, settings.http.port)
    return drivers


@pytest.mark.downloads
@pytest.mark.parametrize("case", ["umbrella-dev", "umbrella-everything-on"])
def test_umbrella_console_watches_every_enabled_service_at_its_service(
    case: str, rendered: dict[str, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The umbrella fills in the console's services, as its Settings read them: every other
    chart, each instance's URL a rendered Service (or StatefulSet pod) on its http port,
    with the group its own settings give it; and its stores as their persisters reach them."""
    objects = rendered[case]
    settings = console_settings(objects, monkeypatch)
    ports = {pod.workload["metadata"]["labels"]["app.kubernetes.io/name"]: pod.port for pod in pods(objects)}
    drivers = {name: port for name, (_, port) in spark_drivers(objects, monkeypatch).items()}
    watched = {service.name: service for service in settings.services}
    spark = case == "umbrella-everything-on"  # the aggregator a SparkApplication: watched at its driver
    assert ("aggregator" in drivers, "aggregator" in ports) == (spark, not spark)
    ports |= drivers
    assert set(watched) == set(SERVICES) - {"console"}
    for name, service in watched.items():
        assert {served_at(objects, url) for url in service.urls} == {(name, ports[name])}, service.urls
    assert len(watched["mqtt-proxy"].urls) == (2 if spark else 1)
    assert watched["es-persister"].group == "fluxgate-es-persister" and watched["es-persister"].store == "elasticsearch"
    assert settings.elasticsearch.hosts == ["http://elasticsearch:9200"]
    assert settings.scylla.contact_points == ["scylla"] and settings.hazelcast.members == ["hazelcast:5701"]


@pytest.mark.downloads
def test_spark_driver_is_served_and_scraped_on_the_port_its_settings_open(
    rendered: dict[str, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In sparkApplication mode the aggregator's Service picks the driver alone (the
    executors serve no HTTP) on the port the driver's Settings serve, and a ServiceMonitor
    scrapes it there: a PodMonitor could not, the driver's spec declaring no such port."""
    objects = rendered["umbrella-everything-on"]
    [app] = [o for o in objects if o["kind"] == "SparkApplication"]
    driver, port = spark_drivers(objects, monkeypatch)["aggregator"]
    [service] = [o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == app["metadata"]["name"]]
    selector = service["spec"]["selector"].items()
    assert selector <= driver.workload["spec"]["template"]["metadata"]["labels"].items()
    assert not selector <= app["spec"]["executor"]["labels"].items(), "the Service would pick the executors"
    assert [(p["name"], p["targetPort"]) for p in service["spec"]["ports"]] == [("http", port)]
    named = [o for o in objects if o["metadata"]["name"] == app["metadata"]["name"]]
    monitors = {o["kind"]: o["spec"] for o in named if o["kind"].endswith("Monitor")}
    assert set(monitors) == {"ServiceMonitor"}, "a PodMonitor finds no declared port on the driver"
    [endpoint] = monitors["ServiceMonitor"]["endpoints"]
    assert monitors["ServiceMonitor"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert (endpoint["port"], endpoint["path"]) == ("http", "/metrics")


@pytest.mark.downloads
def test_spark_driver_and_executors_run_the_parallel_collector_beside_a_users_spark_conf(
    built_charts: Path,
) -> None:
    """The JVMs of a SparkApplication start before the job's code can choose their collector,
    so the chart asks for the one the job measured best; a user's own key is added to it."""
    values = {"mode": "sparkApplication", "sparkApplication": {"image": "registry.example/agg:1",
              "sparkConf": {"spark.sql.shuffle.partitions": "8"}}}  # fmt: skip
    [app] = [o for o in render(built_charts / "aggregator", values=[values]) if o["kind"] == "SparkApplication"]
    assert app["spec"]["sparkConf"] == {
        "spark.driver.extraJavaOptions": "-XX:+UseParallelGC",
        "spark.executor.extraJavaOptions": "-XX:+UseParallelGC",
        "spark.sql.shuffle.partitions": "8",
    }


@pytest.mark.downloads
def test_umbrella_console_leaves_out_what_is_disabled_and_keeps_what_is_set(
    built_charts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    off = {name: {"enabled": False} for name in ("mqtt-proxy", "es-persister", "hazelcast-persister")}
    own = {"console": {"config": {"FLUXGATE_CONSOLE_HAZELCAST__MEMBERS": ["hz:5701"]}},
           "device-status": {"config": {"FLUXGATE_STATUS_STATUS__APP_ID": "status-2"}}}  # fmt: skip
    objects = render(built_charts / UMBRELLA, values=[built_charts / UMBRELLA / "values-dev.yaml", off, own])
    settings = console_settings(objects, monkeypatch)
    groups = {service.name: service.group for service in settings.services}
    assert groups == {"coap-ingest": None, "aggregator": "fluxgate-aggregator", "device-status": "status-2",
                      "scylla-persister": "fluxgate-scylla-persister"}  # fmt: skip
    assert settings.elasticsearch.hosts == [], "es-persister left out: Elasticsearch not shown"
    assert settings.hazelcast.members == ["hz:5701"], "console.config wins over what the umbrella fills in"
    none = render(built_charts / UMBRELLA, values=[{"console": {"enabled": False}}])
    assert not [o for o in none if o["metadata"]["name"].endswith("-console")]


@pytest.mark.downloads
def test_console_serves_its_page_on_the_port_its_settings_open(
    rendered: dict[str, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = rendered["console"]
    settings = console_settings(objects, monkeypatch)
    [pod] = pods(objects)
    [service] = [o for o in objects if o["kind"] == "Service"]
    web = {"name": "web", "protocol": "TCP"}
    assert {**web, "containerPort": settings.web.port} in pod.container["ports"]
    assert {**web, "port": settings.web.port, "targetPort": "web"} in service["spec"]["ports"]
    assert settings.services == [], "alone, the chart watches nothing rather than its own pod's 127.0.0.1"


def revealed(value: Any) -> Any:
    return value.get_secret_value() if isinstance(value, SecretStr) else value


def mounted_volume(pod: Pod, path: str) -> dict[str, Any]:
    """The volume (its source, whatever its name) the pod has mounted where ``path`` is."""
    [mount] = [m for m in pod.container.get("volumeMounts", []) if path.startswith(m["mountPath"].rstrip("/") + "/")]
    [volume] = [v for v in pod.workload["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]]
    return {key: value for key, value in volume.items() if key != "name"}


@pytest.mark.downloads
@pytest.mark.parametrize(
    ("persister", "console_group", "access"),
    [("es-persister", "elasticsearch", ElasticsearchAccess), ("scylla-persister", "scylla", ScyllaAccess),
     ("hazelcast-persister", "hazelcast", HazelcastAccess)],
)  # fmt: skip
def test_umbrella_console_reaches_each_store_with_its_persisters_tls_and_credentials(
    persister: str,
    console_group: str,
    access: type[Any],
    rendered: dict[str, list[dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every TLS and credential setting of the console's store is its persister's, passwords
    from the persister's Secret key, and each certificate file is on the same volume source."""
    objects = rendered["umbrella-stores-tls"]
    [pod] = [p for p in pods(objects) if p.workload["metadata"]["name"] == f"fluxgate-{persister}"]
    env = pod.env(objects, SECRETS)
    theirs = getattr(specs.load_with_env(settings_of(pod, env), env, monkeypatch), console_group)
    [console] = [p for p in pods(objects) if p.argv == ["fluxgate-console"]]
    ours = getattr(console_settings(objects, monkeypatch), console_group)
    for field in access.model_fields:
        mine, given = (revealed(getattr(group, field)) for group in (ours, theirs))
        assert mine == given, f"{console_group}.{field}: {mine!r}, the persister's {given!r}"
    assert ours.model_fields_set & {"username", "password"} or ours.api_key, f"{console_group}: credentials set"
    files = [path for name in access.model_fields if name in TLS_FILES and (path := getattr(ours, name))]
    assert files, f"{console_group}: a TLS file set"
    for path in files:
        assert mounted_volume(console, path) == mounted_volume(pod, path), path
    console_volumes = {v["name"] for v in console.workload["spec"]["template"]["spec"]["volumes"]}
    assert "hazelcast-persister-spare" not in console_volumes, "a volume holding no store file is not carried"

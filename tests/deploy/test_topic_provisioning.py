"""The umbrella chart's topic-provisioning Job, rendered by helm and run for real: its
container's exact command and environment (as the kubelet builds it, Secrets and volumes
included) run as a local process against the local stack's SASL_SSL Kafka listener, as a
principal allowed only to create, describe and describe the configs of the test's topics.
Every topic the services' Settings name (files/topics.json, renamed to the test's own names
in the test's copy of the charts, so nothing shared is touched) must then exist with the
partitions and config the values asked for; a second run creates nothing and fails nothing,
and a topic that differs from the values is reported, never changed. The Job then runs once
more in the image it names (`make images`), as its pod runs it (uid, read-only root, dropped
capabilities, its Secret volumes mounted)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from chart_schemas import pipeline_topics
from charts import UMBRELLA, copy_built, install_dry_run, render
from confluent_kafka.admin import AdminClient, ConfigResource
from containers import ContainerLauncher
from fluxgate_testing.k8s import Pod

from fluxgate_stack import Grant

# The images fixture may wait for CI's background build of every image (a fresh machine: minutes).
IMAGES_TIMEOUT_S = 2700

CA_MOUNT = "/etc/fluxgate/kafka-ca"
KUBERNETES = "1.37.0"  # test_charts' version of the schemas
COMMAND = ["python", "-m", "fluxgate_core.topic_provisioning"]


@pytest.mark.downloads
def test_the_notes_name_every_topic_and_where_the_jobs_report_is(built_charts: Path) -> None:
    notes = install_dry_run(built_charts / UMBRELLA, values=[built_charts / UMBRELLA / "values-dev.yaml"]).notes
    assert all(topic in notes for topic in pipeline_topics()), notes
    assert "kubectl -n fluxgate logs job/fluxgate-topics" in notes


def test_the_jobs_default_image_holds_its_entry_point() -> None:
    """mqtt-proxy's image installs fluxgate-core (this module) and confluent-kafka from its lock."""
    root = Path(__file__).resolve().parents[2]
    assert "COPY libs/fluxgate-core " in (root / "services/mqtt-proxy/Dockerfile").read_text()
    lock = (root / "services/mqtt-proxy/requirements.lock").read_text()
    assert any(line.startswith("confluent-kafka==") for line in lock.splitlines())


def job_topics(charts: Path, values: dict[str, Any]) -> set[str]:
    objects = render(charts / UMBRELLA, values=[charts / UMBRELLA / "values-dev.yaml", values])
    pod = job_of(objects)
    return set(json.loads(pod.env(objects)["FLUXGATE_TOPICS_TOPICS"]))


@pytest.mark.downloads
def test_a_topic_renamed_in_a_charts_config_is_created_by_its_new_name(built_charts: Path) -> None:
    defaults = set(pipeline_topics())
    assert job_topics(built_charts, {}) == defaults
    renamed = {"aggregator": {"config": {"FLUXGATE_AGG_LATE_TOPIC": "my.late"}},
               "console": {"config": {"FLUXGATE_CONSOLE_DEADLETTERS__TOPICS": ["my.dead"],
                                      "FLUXGATE_CONSOLE_REPLAY__AUDIT_TOPIC": "my.audit"}}}  # fmt: skip
    assert job_topics(built_charts, renamed) == defaults - {"temperatures.late", "console.replays"} | {
        "my.late", "my.dead", "my.audit"}  # fmt: skip
    # Named by a KCQL too (the persisters'): kept, whatever the aggregator's config says.
    aggregated = {"aggregator": {"config": {"FLUXGATE_AGG_OUTPUT_TOPIC": "my.aggregates"}}}
    assert {"temperatures.aggregated", "my.aggregates"} <= job_topics(built_charts, aggregated)
    assert "temperatures.late" not in job_topics(built_charts, {"aggregator": {"enabled": False}})
    off = job_topics(built_charts, {"topicProvisioning": {"topics": {"extra": {"partitions": 1}}}})
    assert off == defaults | {"extra"}


@pytest.fixture(scope="module")
def prefix() -> str:
    return f"it-topics-{uuid.uuid4().hex[:8]}."


def charts_naming(folder: Path, prefix: str) -> Path:
    """A copy of the charts in ``folder`` whose generated topic list names ``prefix``'s topics."""
    built = copy_built(folder)
    listed = built / UMBRELLA / "files" / "topics.json"
    document = json.loads(listed.read_text())
    document["topics"] = {prefix + name: where for name, where in document["topics"].items()}
    listed.write_text(json.dumps(document))
    return built


@pytest.fixture(scope="module")
def charts(tmp_path_factory: pytest.TempPathFactory, prefix: str) -> Path:
    return charts_naming(tmp_path_factory.mktemp("topics") / "charts", prefix)


@pytest.fixture(scope="module")
def admin(stack: Any, prefix: str) -> Iterator[AdminClient]:
    client = AdminClient({"bootstrap.servers": stack.bootstrap})
    yield client
    mine = [name for name in client.list_topics(timeout=15).topics if name.startswith(prefix)]
    for future in (client.delete_topics(mine, request_timeout=30) if mine else {}).values():
        future.result(timeout=30)


def secured_values(secured_kafka: Any, prefix: str, user: str, overrides: dict[str, Any]) -> dict[str, Any]:
    return {
        "global": {"kafka": {"bootstrapServers": secured_kafka.bootstrap, "securityProtocol": "SASL_SSL",
                             "saslMechanism": "SCRAM-SHA-512", "saslUsername": user,
                             "sslCaLocation": f"{CA_MOUNT}/ca.crt"}},
        "topicProvisioning": {
            "defaults": {"partitions": 2, "replication_factor": 1, "config": {"retention.ms": "86400000"}},
            "topics": overrides,
            "secrets": {"files": {"FLUXGATE_TOPICS_KAFKA__SASL_PASSWORD_FILE": {"secret": "kafka-user", "key": "pw"}}},
            "extraVolumes": [{"name": "kafka-ca", "secret": {"secretName": "kafka-ca"}}],
            "extraVolumeMounts": [{"name": "kafka-ca", "mountPath": CA_MOUNT, "readOnly": True}],
        },
    }  # fmt: skip


def job_of(objects: list[dict[str, Any]]) -> Pod:
    [job] = [obj for obj in objects if obj["kind"] == "Job"]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    kubernetes_validate.validate(job, KUBERNETES, strict=True)  # unknown fields fail, as in test_charts
    return Pod(job, 0, "fluxgate")


def materialized(pod: Pod, secrets: dict[tuple[str, str], str], root: Path) -> dict[str, Path]:
    """Each of the container's volume mounts as a local folder holding what the kubelet would
    put there (emptyDir, a Secret, a projected Secret's items): mount path -> folder."""
    volumes = {v["name"]: v for v in pod.workload["spec"]["template"]["spec"]["volumes"]}
    folders = {}
    for mount in pod.container["volumeMounts"]:
        volume, folder = volumes[mount["name"]], root / mount["name"]
        folder.mkdir(parents=True)
        if "secret" in volume:
            name = volume["secret"]["secretName"]
            for (secret, key), value in secrets.items():
                if secret == name:
                    (folder / key).write_text(value)
        for source in volume.get("projected", {}).get("sources", []):
            for item in source["secret"]["items"]:
                (folder / item["path"]).write_text(secrets[(source["secret"]["name"], item["key"])])
        assert {"secret", "projected", "emptyDir"} & set(volume), f"{mount['name']}: a volume this test cannot make"
        folders[mount["mountPath"]] = folder
    return folders


def run_job(
    pod: Pod, objects: list[dict[str, Any]], secrets: dict[tuple[str, str], str], root: Path, code: int = 0
) -> str:
    """The container's command with its environment, its mounts' paths mapped to local folders;
    its output, once it has exited with ``code``."""
    assert pod.argv == COMMAND
    folders = materialized(pod, secrets, root)
    env = pod.env(objects, secrets)
    for name, value in env.items():
        for mount, folder in folders.items():
            if value.startswith(mount + "/"):
                env[name] = str(folder) + value[len(mount) :]
    argv = [sys.executable, *pod.argv[1:]]  # `python` of the image: this venv's, fluxgate-core installed
    result = subprocess.run(argv, env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True, timeout=120)
    assert result.returncode == code, result.stdout + result.stderr
    return result.stdout + result.stderr


def described(admin: AdminClient, topics: list[str]) -> dict[str, tuple[int, dict[str, str]]]:
    """Each topic's partitions and config, once this client's broker has them in its metadata
    (a topic created through another listener reaches every broker's cache a moment later)."""
    deadline = time.monotonic() + 15
    while not set(topics) <= set(metadata := admin.list_topics(timeout=15).topics):
        assert time.monotonic() < deadline, f"never listed: {sorted(set(topics) - set(metadata))}"
        time.sleep(0.2)
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in topics]
    configs = {r.name: f.result(timeout=15) for r, f in admin.describe_configs(resources, request_timeout=15).items()}
    return {name: (len(metadata[name].partitions), {k: e.value for k, e in configs[name].items()}) for name in topics}


@pytest.mark.integration  # the local stack's Kafka; downloads: helm, built from the Go module proxy
@pytest.mark.downloads
@pytest.mark.timeout(600)
def test_the_job_creates_every_topic_as_the_values_say_on_a_secured_cluster_and_again_changes_nothing(
    charts: Path, admin: AdminClient, secured_kafka: Any, prefix: str, tmp_path: Path
) -> None:
    principal = secured_kafka.principal(
        "topics", [Grant("topic", prefix, ("CREATE", "DESCRIBE", "DESCRIBE_CONFIGS"), prefixed=True)]
    )
    secrets = {("kafka-user", "pw"): principal.password, ("kafka-ca", "ca.crt"): secured_kafka.ca_file.read_text()}
    late, extra = f"{prefix}temperatures.late", f"{prefix}extra"
    overrides = {late: {"partitions": 1, "config": {"cleanup.policy": "compact"}}, extra: {"partitions": 4}}
    values = [
        charts / UMBRELLA / "values-dev.yaml",
        secured_values(secured_kafka, prefix, principal.username, overrides),
    ]
    objects = render(charts / UMBRELLA, values=values)
    pod = job_of(objects)
    env = pod.env(objects, secrets)
    assert env["FLUXGATE_TOPICS_KAFKA__SECURITY_PROTOCOL"] == "SASL_SSL"
    assert "FLUXGATE_TOPICS_KAFKA__SASL_PASSWORD" not in env, "the password comes from its file alone"

    first = run_job(pod, objects, secrets, tmp_path / "first")
    wanted = sorted({prefix + name for name in pipeline_topics()} | {extra})
    assert first.count("kafka.topic.created") == len(wanted), first
    found = described(admin, wanted)
    for name in wanted:
        partitions, config = found[name]
        assert partitions == {late: 1, extra: 4}.get(name, 2), name
        assert config["retention.ms"] == "86400000", name
        assert config["cleanup.policy"] == ("compact" if name == late else "delete"), name

    again = run_job(pod, objects, secrets, tmp_path / "again")
    assert "kafka.topic.created" not in again and "kafka.topic.mismatch" not in again, again
    assert again.count("kafka.topic.present") == len(wanted), again

    more = secured_values(secured_kafka, prefix, principal.username, {**overrides, extra: {"partitions": 6}})
    objects = render(charts / UMBRELLA, values=[values[0], more])
    changed = run_job(job_of(objects), objects, secrets, tmp_path / "changed")
    [line] = [line for line in changed.splitlines() if "kafka.topic.mismatch" in line]
    assert extra in line and "partitions 4, asked 6" in line, line
    assert described(admin, [extra])[extra][0] == 4, "an existing topic is left as it is"


@pytest.mark.integration  # the local stack's Kafka; downloads: helm, built from the Go module proxy
@pytest.mark.downloads
@pytest.mark.timeout(600)
def test_a_refused_login_fails_the_job_naming_the_setting(
    charts: Path, secured_kafka: Any, prefix: str, tmp_path: Path
) -> None:
    values = [charts / UMBRELLA / "values-dev.yaml", secured_values(secured_kafka, prefix, "nobody-" + prefix, {})]
    objects = render(charts / UMBRELLA, values=values)
    secrets = {("kafka-user", "pw"): "wrong", ("kafka-ca", "ca.crt"): secured_kafka.ca_file.read_text()}
    refused = run_job(job_of(objects), objects, secrets, tmp_path, code=2)
    assert "FLUXGATE_TOPICS_KAFKA__SASL_PASSWORD_FILE" in refused, refused


@pytest.mark.integration  # the local stack's Kafka; the image, built by podman (make images)
@pytest.mark.downloads
@pytest.mark.containers
@pytest.mark.timeout(IMAGES_TIMEOUT_S)
def test_the_job_runs_in_the_image_its_pod_names_as_its_pod_runs_it(
    images: str, admin: AdminClient, secured_kafka: Any, prefix: str, tmp_path: Path
) -> None:
    """What the process runs above prove of the Job's command, proven of its image: the
    rendered image holds the entry point and a Kafka client that logs in over SASL_SSL, as
    uid 10001 on a read-only root filesystem with every capability dropped, reading its
    password and CA from the pod's Secret volumes."""
    mine = f"{prefix}image."  # its own topics, whichever of this module's tests runs first
    charts = charts_naming(tmp_path / "charts", mine)
    principal = secured_kafka.principal(
        "topics-image", [Grant("topic", mine, ("CREATE", "DESCRIBE", "DESCRIBE_CONFIGS"), prefixed=True)]
    )
    secrets = {("kafka-user", "pw"): principal.password, ("kafka-ca", "ca.crt"): secured_kafka.ca_file.read_text()}
    values = [charts / UMBRELLA / "values-dev.yaml", secured_values(secured_kafka, mine, principal.username, {})]
    objects = render(charts / UMBRELLA, values=values)
    pod = job_of(objects)
    assert pod.argv == COMMAND
    launcher = ContainerLauncher(
        f"topics-{uuid.uuid4().hex[:6]}", tmp_path, images,
        mounts={"mqtt-proxy": materialized(pod, secrets, tmp_path / "volumes")},
        security={"mqtt-proxy": pod.container["securityContext"]},
    )  # fmt: skip
    assert pod.container["image"] == launcher.image("mqtt-proxy"), "the test runs the image the Job names"
    argv, env = launcher.command("mqtt-proxy", pod.argv, pod.env(objects, secrets))
    try:
        result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180, check=False)
    finally:
        launcher.remove_all()
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    wanted = sorted(mine + name for name in pipeline_topics())
    assert output.count("kafka.topic.created") == len(wanted), output
    assert {name: found[0] for name, found in described(admin, wanted).items()} == dict.fromkeys(wanted, 2)

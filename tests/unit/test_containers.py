"""How a service's argv, environment and pod spec become a `podman run` (no engine needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from containers import CHART_SECURITY, ContainerLauncher, memory_bytes, security_flags


def test_the_charts_security_context_becomes_the_same_podman_options() -> None:
    assert security_flags(CHART_SECURITY) == [
        "--user", "10001:10001", "--read-only", "--security-opt", "no-new-privileges", "--cap-drop", "all",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "context",
    [
        {**CHART_SECURITY, "privileged": True},
        {**CHART_SECURITY, "capabilities": {"add": ["NET_ADMIN"]}},
        {**CHART_SECURITY, "windowsOptions": {}},
        {"readOnlyRootFilesystem": True},
        {"runAsUser": 0, "runAsNonRoot": True},
    ],
)
def test_a_context_podman_cannot_apply_the_same_way_is_refused(context: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"securityContext|privileged"):
        security_flags(context)


def test_a_service_runs_its_pods_command_with_only_its_volumes_writable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launcher = ContainerLauncher("run1", tmp_path)
    monkeypatch.setattr(launcher, "remove", lambda name: None)
    monkeypatch.setattr(launcher, "own", lambda folder: folder)
    env = {"FLUXGATE_AGG_CHECKPOINT_DIR": "/var/ckpt", "FLUXGATE_AGG_KAFKA__SASL_PASSWORD": "s3cret"}
    argv, podman_env = launcher.command("aggregator", ["/venv/bin/fluxgate-aggregator", "run"], env)
    assert argv[argv.index("--entrypoint") + 1] == "fluxgate-aggregator"
    assert argv[-2:] == ["fluxgate/aggregator:0.1.0", "run"]
    mounts = [argv[i + 1] for i, arg in enumerate(argv) if arg in ("-v", "--tmpfs")]
    assert mounts == ["/tmp:rw,exec,nosuid,nodev,mode=1777", f"{tmp_path}/aggregator/home-fluxgate:/home/fluxgate",
                      "/var/ckpt:/var/ckpt"]  # fmt: skip
    assert "s3cret" not in " ".join(argv)  # passed by name: podman reads the value from its environment
    assert podman_env["FLUXGATE_AGG_KAFKA__SASL_PASSWORD"] == "s3cret"
    assert "CONTAINERS_CONF" in podman_env


def test_a_pods_own_volumes_replace_the_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    launcher = ContainerLauncher("run1", tmp_path, mounts={"console": {"/tmp": tmp_path / "tmp"}})
    monkeypatch.setattr(launcher, "remove", lambda name: None)
    monkeypatch.setattr(launcher, "own", lambda folder: folder)
    argv, _ = launcher.command("console", ["fluxgate-console"], {})
    assert [argv[i + 1] for i, arg in enumerate(argv) if arg in ("-v", "--tmpfs")] == [f"{tmp_path}/tmp:/tmp"]


QUANTITIES = [("3Gi", 3 << 30), ("256Mi", 256 << 20), ("1.5Gi", 3 << 29), ("1024Ki", 1 << 20), ("1G", 10**9),
              ("500M", 5 * 10**8), ("1048576", 1 << 20)]  # fmt: skip


@pytest.mark.parametrize(("quantity", "size"), QUANTITIES)
def test_a_kubernetes_memory_quantity_in_bytes(quantity: str, size: int) -> None:
    assert memory_bytes(quantity) == size


def test_a_pods_memory_limit_is_the_containers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    launcher = ContainerLauncher("run1", tmp_path, memory={"aggregator": "3Gi"})
    monkeypatch.setattr(launcher, "remove", lambda name: None)
    monkeypatch.setattr(launcher, "own", lambda folder: folder)
    argv, _ = launcher.command("aggregator", ["fluxgate-aggregator", "run"], {})
    assert argv[argv.index("--memory") + 1] == str(3 << 30)
    argv, _ = launcher.command("console", ["fluxgate-console"], {})
    assert "--memory" not in argv

"""What every built image carries, and what it must not: its OCI labels and tags, a numeric
non-root user, its HEALTHCHECK (podman drops it unless told to keep Docker's format), and
nothing of the build's secrets (the proxy's CA bundle and the pip and Maven settings naming
it are mounted for one RUN step only)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from images import IMAGES, VERSION, podman_env, revision

# The images fixture may wait for CI's background build of every image (a fresh machine: minutes).
IMAGES_TIMEOUT_S = 2700
pytestmark = [pytest.mark.integration, pytest.mark.downloads, pytest.mark.containers,
              pytest.mark.timeout(IMAGES_TIMEOUT_S)]  # fmt: skip


def inspect(image: str) -> dict[str, Any]:
    result = subprocess.run(["podman", "image", "inspect", image], env=podman_env(), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    [found] = json.loads(result.stdout)
    return dict(found)


def run_in(image: str, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", "run", "--rm", "--no-healthcheck", "--entrypoint", "sh", image, "-c", script],
                          env=podman_env(), capture_output=True, text=True, timeout=120)  # fmt: skip


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_an_image_says_what_it_is_runs_as_uid_10001_and_checks_its_own_health(images: str, name: str) -> None:
    found = inspect(f"fluxgate/{name}:{images}")
    labels, config = found["Labels"], found["Config"]
    assert labels["org.opencontainers.image.title"] == f"fluxgate-{name}"
    assert labels["org.opencontainers.image.version"] == VERSION
    assert labels["org.opencontainers.image.revision"] == revision()
    assert labels["org.opencontainers.image.source"] not in ("", "unknown")
    assert f"localhost/fluxgate/{name}:latest" in found["RepoTags"]
    assert config["User"] == "10001:10001"
    assert found["Healthcheck"]["Test"][0] == "CMD"  # kept: built in Docker's format


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_nothing_of_the_builds_secrets_stays_in_an_image(images: str, name: str) -> None:
    script = ("test ! -e /etc/pip.conf && test ! -e /etc/mavenrc && test -z \"$(ls -A /run/secrets 2>/dev/null)\""
              " && ! grep -rqs 'run/secrets' /etc /usr/local/pip.conf /root 2>/dev/null && echo clean")  # fmt: skip
    result = run_in(f"fluxgate/{name}:{images}", script)
    assert result.stdout.strip() == "clean", result.stdout + result.stderr

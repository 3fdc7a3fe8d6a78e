"""Fluxgate's container images, built for real from the services' own Dockerfiles.

No Docker engine runs on our machines and no image registry is reachable, so this uses
Debian's podman (its ``build`` is buildah's) and makes a stand-in for the Dockerfiles'
``python:3.11-slim-bookworm`` base from Debian's packages with mmdebstrap: Debian bookworm's
Python is 3.11, put into a venv at ``/usr/local`` so that ``python`` and ``pip`` sit where
the official image has them. Each Dockerfile names its base in ``ARG BASE_IMAGE``, the
official image pinned by digest (what ``docker build`` on a user's machine and the published
images use); the build here passes the stand-in's local name instead (a digest names content,
so no local tag can stand in for it). ``pin-base`` sets that digest in every Dockerfile.

A TLS-intercepting proxy (as in many companies, and on our machines) needs its CA in the
RUN steps that download. The Dockerfiles read it only through BuildKit secrets, which are
mounted for one RUN step and never written into a layer: ``ca.crt`` (a PEM bundle) with a
``pip.conf`` that names it, and for the aggregator's Maven step ``java-cacerts`` with a
``mavenrc`` that names it. Without the secrets the same steps use the image's own CAs.

    python tools/images.py build [SERVICE ...]   # the base stand-in if missing, then each image not
                                                 # built from this commit in an unchanged checkout
    python tools/images.py sizes                 # each image's size, as JSON
    python tools/images.py pin-base sha256:...   # the official base's digest, into every Dockerfile
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".local" / "images"
CONTAINERS_CONF = WORK / "containers.conf"
VERSION = "0.1.0"  # the charts' appVersion: an image's tag is what the chart pulls
# The stand-in, under a local name of its own: the Dockerfiles get it as --build-arg BASE_IMAGE.
STAND_IN = "localhost/fluxgate/python-stand-in:3.11-slim-bookworm"
# What every Dockerfile's `ARG BASE_IMAGE` names: the official image, by tag and (once pinned) digest.
OFFICIAL_BASE = "docker.io/library/python:3.11-slim-bookworm"
BASE_ARG = re.compile(r"^ARG BASE_IMAGE=(\S+)$", re.MULTILINE)
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
# What a slim image leaves out: documentation, manual pages and translations.
SLIM_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/locale/*")
# libpython3.11-dev: the official image carries the C headers, which C extensions built from source need.
BASE_PACKAGES = ("python3", "python3-venv", "libpython3.11-dev", "ca-certificates")
# As Debian's own images do, apt removes the packages it downloaded once they are installed.
APT_CLEAN = (
    "".join(
        f'{hook} {{ "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin'
        ' || true"; };\n'
        for hook in ("DPkg::Post-Invoke", "APT::Update::Post-Invoke")
    )
    + 'Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";\n'
)
BASE_RECIPE = """FROM scratch
ADD rootfs.tar /
COPY docker-clean /etc/apt/apt.conf.d/docker-clean
# The official image's layout: python, pip and console scripts in /usr/local/bin.
RUN python3 -m venv /usr/local && rm -rf /root/.cache
ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
LABEL dev.fluxgate.base="a local stand-in for python:3.11-slim, from Debian bookworm's packages"
CMD ["python3"]
"""
# The images, by the name the charts pull (fluxgate/<name>), and their Dockerfiles.
IMAGES = {
    "mqtt-proxy": "services/mqtt-proxy/Dockerfile",
    "coap-ingest": "services/coap-ingest/Dockerfile",
    "aggregator": "services/aggregator/Dockerfile",
    "es-persister": "services/persisters/elasticsearch/Dockerfile",
    "scylla-persister": "services/persisters/scylla/Dockerfile",
    "hazelcast-persister": "services/persisters/hazelcast/Dockerfile",
    "device-status": "services/device-status/Dockerfile",
    "console": "services/console/Dockerfile",
}
# Podman as root on these hosts: runc (crun refuses the hybrid cgroup layout), cgroupfs, and
# resource limits set explicitly below the host's (raising them is not permitted here). The
# process limit counts every process and thread of a user across all containers, and every
# image runs as uid 10001: at 1,024, the Spark cluster's driver beside compose's services
# could not start a thread (a red CI run); 16,384 is still far under the host's 96,365.
ENGINE_CONF = """[containers]
default_ulimits = ["nofile=4096:4096", "nproc=16384:16384"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
"""


class ImageError(RuntimeError):
    """A build step failed; the message carries the tool's own output."""


def podman_env() -> dict[str, str]:
    """The environment every podman call runs with (it reads its engine settings from there)."""
    WORK.mkdir(parents=True, exist_ok=True)
    if not CONTAINERS_CONF.exists() or CONTAINERS_CONF.read_text() != ENGINE_CONF:
        CONTAINERS_CONF.write_text(ENGINE_CONF)
    return {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}


def podman(*args: str, timeout: float = 1800) -> str:
    """Run podman; its output, or ImageError with what it said."""
    result = subprocess.run(
        ["podman", *args], env=podman_env(), capture_output=True, text=True, timeout=timeout, check=False
    )
    if result.returncode:
        raise ImageError(f"podman {' '.join(args[:2])} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    return result.stdout


def ensure_tools() -> None:
    """podman, runc and mmdebstrap from Debian, installed if missing."""
    sys.path.insert(0, str(ROOT / "tools" / "stack" / "src"))
    from fluxgate_stack.fetch import ensure_debian_packages

    ensure_debian_packages({"podman": "podman", "runc": "runc", "mmdebstrap": "mmdebstrap"})


def recipe_digest() -> str:
    """What decides the stand-in's content: a change to it builds the base again."""
    text = "\n".join([BASE_RECIPE, APT_CLEAN, *BASE_PACKAGES, *SLIM_EXCLUDES])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def base_is_current() -> bool:
    try:
        labels = json.loads(podman("image", "inspect", "--format", "{{json .Labels}}", STAND_IN))
    except ImageError:
        return False
    return (labels or {}).get("dev.fluxgate.base-recipe") == recipe_digest()


def build_base() -> None:
    """The ``python:3.11-slim-bookworm`` stand-in, from a Debian bookworm root filesystem."""
    if base_is_current():
        return
    rootfs = WORK / "rootfs.tar"
    command = ["mmdebstrap", "--variant=minbase", "--include=" + ",".join(BASE_PACKAGES)]
    command += [f"--dpkgopt=path-exclude={pattern}" for pattern in SLIM_EXCLUDES]
    command += ["bookworm", str(rootfs)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    if result.returncode:
        raise ImageError(f"mmdebstrap failed ({result.returncode}):\n{result.stderr[-4000:]}")
    (WORK / "Containerfile.base").write_text(BASE_RECIPE)
    (WORK / "docker-clean").write_text(APT_CLEAN)
    podman("build", "--format", "docker", "--label", f"dev.fluxgate.base-recipe={recipe_digest()}",
           "-f", str(WORK / "Containerfile.base"), "-t", STAND_IN, str(WORK))  # fmt: skip
    rootfs.unlink()


def revision() -> str:
    """The checkout's git revision, marked ``-dirty`` when its tracked files have changes."""
    head = _git("rev-parse", "HEAD") or "unknown"
    return head + ("-dirty" if _git("status", "--porcelain", "--untracked-files=no") else "")


def source_url() -> str:
    return _git("config", "--get", "remote.origin.url") or ROOT.as_uri()


def _git(*args: str) -> str:
    result = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)
    return result.stdout.strip() if result.returncode == 0 else ""


def build_secrets() -> list[str]:
    """``--secret`` options that hand the host's CAs to the RUN steps that download."""
    secrets = WORK / "secrets"
    secrets.mkdir(parents=True, exist_ok=True)
    ca_bundle = Path(os.environ.get("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"))
    (secrets / "pip.conf").write_text("[global]\ncert = /run/secrets/ca.crt\n")
    args = ["--secret", f"id=pip.conf,src={secrets / 'pip.conf'}", "--secret", f"id=ca.crt,src={ca_bundle}"]
    java_cacerts = Path("/etc/ssl/certs/java/cacerts")
    if java_cacerts.exists():
        mavenrc = 'MAVEN_OPTS="$MAVEN_OPTS -Djavax.net.ssl.trustStore=/run/secrets/java-cacerts"\n'
        (secrets / "mavenrc").write_text(mavenrc)
        args += ["--secret", f"id=mavenrc,src={secrets / 'mavenrc'}", "--secret", f"id=java-cacerts,src={java_cacerts}"]
    return args


def image_tags(name: str, rev: str) -> list[str]:
    """The version the charts pull, ``latest``, and the git revision (without ``-dirty``: a tag
    names a commit, and a dirty build must not pass for it)."""
    tags = [f"fluxgate/{name}:{VERSION}", f"fluxgate/{name}:latest"]
    if not rev.endswith("-dirty") and rev != "unknown":
        tags.append(f"fluxgate/{name}:{rev[:12]}")
    return tags


def build_image(name: str) -> None:
    rev = revision()
    args = ["build", "--format", "docker", "-f", str(ROOT / IMAGES[name])]  # docker: keeps HEALTHCHECK
    args += ["--build-arg", f"BASE_IMAGE={STAND_IN}"]  # the Dockerfile's default is the official image, by digest
    args += [arg for tag in image_tags(name, rev) for arg in ("-t", tag)]
    for key, value in (("VERSION", VERSION), ("REVISION", rev), ("SOURCE", source_url())):
        # The build args feed the Dockerfile's LABEL (what `docker build` sets); the labels
        # again on the command line: buildah 1.28 reused a cached LABEL step after the
        # revision changed, so an image kept its previous commit's revision.
        args += ["--build-arg", f"{key}={value}", "--label", f"org.opencontainers.image.{key.lower()}={value}"]
    podman(*args, *build_secrets(), str(ROOT))


def unchanged_commit() -> str | None:
    """The commit this checkout is exactly (no change, no untracked file), or None: then the
    revision label of an image cannot say what it holds, and every image is built again."""
    head = _git("rev-parse", "HEAD")
    return head if head and not _git("status", "--porcelain") else None


def built_from(name: str, commit: str | None) -> bool:
    """True when ``fluxgate/<name>`` was built from ``commit``, the checkout's unchanged commit:
    building it again would only find every layer cached, which still costs each image a few
    seconds. CI builds the images early and each test process that needs them asks again
    (conftest.py ``images``): 62 s of a paired test's setup went to two such rebuilds, one
    waiting for the other."""
    if commit is None:
        return False
    label = '{{index .Labels "org.opencontainers.image.revision"}}'
    try:
        return podman("image", "inspect", "--format", label, f"fluxgate/{name}:{VERSION}").strip() == commit
    except ImageError:
        return False


def pin_base(digest: str) -> list[Path]:
    """Set every Dockerfile's ``ARG BASE_IMAGE`` to the official image at ``digest`` (the image
    index's, so that every platform resolves: ``docker buildx imagetools inspect
    python:3.11-slim-bookworm`` prints it as Digest). The Dockerfiles that changed."""
    if not DIGEST.match(digest):
        raise ImageError(f"not an image digest: {digest!r} (expected sha256: and 64 hex digits)")
    changed = []
    for relative in IMAGES.values():
        dockerfile = ROOT / relative
        text = dockerfile.read_text()
        pinned = BASE_ARG.sub(f"ARG BASE_IMAGE={OFFICIAL_BASE}@{digest}", text)
        if len(BASE_ARG.findall(text)) != 1:
            raise ImageError(f"{relative}: expected one `ARG BASE_IMAGE=` line")
        if pinned != text:
            dockerfile.write_text(pinned)
            changed.append(dockerfile)
    return changed


def sizes() -> dict[str, int]:
    """Each built image's size in bytes (as podman counts it: every layer, uncompressed)."""
    found = {}
    for name in IMAGES:
        try:
            found[name] = int(podman("image", "inspect", "--format", "{{.Size}}", f"fluxgate/{name}:{VERSION}"))
        except ImageError:
            continue
    return found


@contextlib.contextmanager
def one_build_at_a_time() -> Iterator[None]:
    """CI builds the images early, in the background, and the container tests build them
    again: the second waits for the first, then finds each image current."""
    WORK.mkdir(parents=True, exist_ok=True)
    with (WORK / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["build", "base", "sizes", "pin-base"])
    parser.add_argument("services", nargs="*", metavar="SERVICE", help=f"default: all of {', '.join(IMAGES)}")
    options = parser.parse_args(argv)
    if options.command == "pin-base":
        if len(options.services) != 1:
            parser.error("pin-base takes one digest: sha256:<64 hex digits>")
        for dockerfile in pin_base(options.services[0]):
            print(f"pinned {dockerfile.relative_to(ROOT)}")
        return 0
    unknown = sorted(set(options.services) - set(IMAGES))
    if unknown:
        parser.error(f"no image named {', '.join(unknown)}; the images are {', '.join(IMAGES)}")
    if options.command != "sizes":
        with one_build_at_a_time():
            ensure_tools()
            build_base()
            built, commit = 0, unchanged_commit()  # asked once: a build changes no source
            for name in options.services or IMAGES if options.command == "build" else ():
                if built_from(name, commit):
                    print(f"image={name} event=current", flush=True)
                    continue
                print(f"image={name} event=building", flush=True)
                build_image(name)
                built += 1
            if built:
                podman("image", "prune", "--force")  # the layers a rebuild replaced
    print(json.dumps({name: f"{size / 1e6:.0f} MB" for name, size in sizes().items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

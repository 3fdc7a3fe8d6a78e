"""When ``tools/images.py build`` builds an image again and when it leaves it (no engine needed):
only an image built from this very commit, in a checkout that differs from it in nothing, is
left as it is."""

from __future__ import annotations

from dataclasses import dataclass, field

import images
import pytest

REV = "0123456789abcdef0123456789abcdef01234567"
OTHER = "fedcba9876543210fedcba9876543210fedcba98"
CONSOLE = f"fluxgate/console:{images.VERSION}"


@dataclass
class Checkout:
    """A checkout whose HEAD, ``git status`` and images' revision labels a test sets; it
    records every git and podman call."""

    head: str = REV
    status: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    git_calls: list[tuple[str, ...]] = field(default_factory=list)
    podman_calls: list[tuple[str, ...]] = field(default_factory=list)

    def git(self, *args: str) -> str:
        self.git_calls.append(args)
        return {"rev-parse": self.head, "status": self.status}[args[0]]

    def podman(self, *args: str, timeout: float = 1800) -> str:
        self.podman_calls.append(args)
        if args[:2] != ("image", "inspect"):
            return ""
        if args[-1] not in self.labels:
            raise images.ImageError(f"no image {args[-1]}")
        return f"{self.labels[args[-1]]}\n"


@pytest.fixture
def checkout(monkeypatch: pytest.MonkeyPatch) -> Checkout:
    fake = Checkout()
    monkeypatch.setattr(images, "_git", fake.git)
    monkeypatch.setattr(images, "podman", fake.podman)
    return fake


def test_an_image_of_this_commit_in_a_clean_checkout_is_current(checkout: Checkout) -> None:
    checkout.labels = {CONSOLE: REV}
    assert images.built_from("console", images.unchanged_commit())


def test_an_image_of_another_commit_is_built_again(checkout: Checkout) -> None:
    checkout.labels = {CONSOLE: OTHER}
    assert not images.built_from("console", images.unchanged_commit())


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (REV, "?? services/console/src/fluxgate_console/new.py\n"),  # an untracked file it may copy
        (REV, " M services/console/src/fluxgate_console/view.py\n"),  # a change: the label cannot say which
        ("", ""),  # not a git checkout
    ],
)
def test_in_a_changed_checkout_every_image_is_built_again(checkout: Checkout, head: str, status: str) -> None:
    checkout.head, checkout.status, checkout.labels = head, status, {CONSOLE: REV}
    assert images.unchanged_commit() is None
    assert not images.built_from("console", None)


def test_an_image_not_built_yet_is_built(checkout: Checkout) -> None:
    assert not images.built_from("console", REV)
    assert checkout.podman_calls, "podman was asked for the image"


def test_build_builds_only_what_is_not_current_and_prunes_only_after_a_build(
    checkout: Checkout, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    built: list[str] = []
    monkeypatch.setattr(images, "ensure_tools", lambda: None)
    monkeypatch.setattr(images, "build_base", lambda: None)
    monkeypatch.setattr(images, "sizes", dict)
    monkeypatch.setattr(images, "build_image", built.append)
    checkout.labels = {f"fluxgate/{name}:{images.VERSION}": REV for name in images.IMAGES if name != "console"}
    assert images.main(["build"]) == 0
    prunes = [call for call in checkout.podman_calls if call[:2] == ("image", "prune")]
    assert built == ["console"] and prunes == [("image", "prune", "--force")]
    assert "image=aggregator event=current" in capsys.readouterr().out
    # The checkout's state is asked once for the whole build, not once per image.
    assert len(checkout.git_calls) == 2, checkout.git_calls

    built.clear(), checkout.podman_calls.clear()
    checkout.labels[CONSOLE] = REV
    assert images.main(["build"]) == 0
    assert built == [] and not [call for call in checkout.podman_calls if call[:2] == ("image", "prune")]

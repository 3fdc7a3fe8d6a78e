"""When ``tools/images.py build`` builds an image again and when it leaves it (no engine needed):
only an image built from this very commit, in a checkout that differs from it in nothing, is
left as it is."""

from __future__ import annotations

from typing import Any

import images
import pytest

REV = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def checkout(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A checkout whose ``git status`` and images' revision labels the test sets."""
    state: dict[str, Any] = {"status": "", "labels": {}, "asked": []}

    def git(*args: str) -> str:
        assert args[0] == "status", args
        return str(state["status"])

    def podman(*args: str, timeout: float = 1800) -> str:
        state["asked"].append(args)
        image = args[-1]
        if image not in state["labels"]:
            raise images.ImageError(f"no image {image}")
        return f"{state['labels'][image]}\n"

    monkeypatch.setattr(images, "_git", git)
    monkeypatch.setattr(images, "podman", podman)
    return state


def test_an_image_of_this_commit_in_a_clean_checkout_is_current(checkout: dict[str, Any]) -> None:
    checkout["labels"] = {f"fluxgate/console:{images.VERSION}": REV}
    assert images.built_from_this_checkout("console", REV)


@pytest.mark.parametrize(
    ("rev", "status", "label"),
    [
        (REV, "", "fedcba9876543210fedcba9876543210fedcba98"),  # built from another commit
        (REV, "?? services/console/src/fluxgate_console/new.py\n", REV),  # an untracked file it may copy
        (REV + "-dirty", "", REV + "-dirty"),  # a change: the label cannot say which
        ("unknown", "", "unknown"),  # not a git checkout
    ],
)
def test_an_image_of_another_commit_or_of_a_changed_checkout_is_built_again(
    checkout: dict[str, Any], rev: str, status: str, label: str
) -> None:
    checkout["status"], checkout["labels"] = status, {f"fluxgate/console:{images.VERSION}": label}
    assert not images.built_from_this_checkout("console", rev)


def test_an_image_not_built_yet_is_built(checkout: dict[str, Any]) -> None:
    assert not images.built_from_this_checkout("console", REV)
    assert checkout["asked"], "podman was asked for the image"


def test_build_builds_only_what_is_not_current_and_prunes_only_after_a_build(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    built: list[str] = []
    pruned: list[tuple[str, ...]] = []
    monkeypatch.setattr(images, "ensure_tools", lambda: None)
    monkeypatch.setattr(images, "build_base", lambda: None)
    monkeypatch.setattr(images, "revision", lambda: REV)
    monkeypatch.setattr(images, "sizes", lambda: {})
    monkeypatch.setattr(images, "build_image", built.append)
    monkeypatch.setattr(images, "podman", lambda *args, **_: pruned.append(args) or "")
    monkeypatch.setattr(images, "built_from_this_checkout", lambda name, rev: name != "console")
    assert images.main(["build"]) == 0
    assert built == ["console"] and pruned == [("image", "prune", "--force")]
    assert "image=aggregator event=current" in capsys.readouterr().out

    built.clear(), pruned.clear()
    monkeypatch.setattr(images, "built_from_this_checkout", lambda name, rev: True)
    assert images.main(["build"]) == 0
    assert built == [] and pruned == []

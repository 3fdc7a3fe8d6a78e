"""The writer schemas a batch decodes with: learned from the registry when a batch meets an
id, never guessed while the registry is away."""

from __future__ import annotations

import pytest

from fluxgate_aggregator.writers import RegistryUnavailable, WriterSchemas
from fluxgate_core.backoff import Backoff
from fluxgate_core.errors import RegistryError

NO_WAIT = Backoff(1e-6, 1e-6)


class Registry:
    """The subject's versions; ``down`` for that many listings."""

    def __init__(self, versions: dict[int, str], down: int = 0) -> None:
        self.versions, self.down, self.listings = versions, down, 0

    def __call__(self) -> dict[int, str]:
        self.listings += 1
        if self.down:
            self.down -= 1
            raise RegistryError("cannot list schemas of sensors.readings-value: connection refused")
        return dict(self.versions)


def test_an_id_met_is_learned_when_the_subject_holds_it_and_only_then() -> None:
    registry = Registry({1: "v1", 2: "v2"})
    writers = WriterSchemas({1: "v1"}, registry, backoff=NO_WAIT)
    assert writers.learn([2, 99]) == [2] and writers.schemas == {1: "v1", 2: "v2"}
    assert writers.learn([1]) == [] and registry.listings == 1, "a known id asks nothing"
    assert writers.learn([99]) == [] and registry.listings == 2


def test_a_registry_away_for_a_while_is_asked_again() -> None:
    registry = Registry({1: "v1", 2: "v2"}, down=3)
    assert WriterSchemas({1: "v1"}, registry, attempts=5, backoff=NO_WAIT).learn([2]) == [2]
    assert registry.listings == 4


def test_a_registry_that_never_answers_fails_the_batch_instead_of_judging_its_records() -> None:
    registry = Registry({2: "v2"}, down=10)
    writers = WriterSchemas({1: "v1"}, registry, attempts=3, backoff=NO_WAIT)
    with pytest.raises(RegistryUnavailable, match="after 3 attempts"):
        writers.learn([2])
    assert registry.listings == 3 and writers.schemas == {1: "v1"}


def test_without_a_registry_the_known_schemas_are_all_there_is() -> None:
    assert WriterSchemas({1: "v1"}, None).learn([2]) == []

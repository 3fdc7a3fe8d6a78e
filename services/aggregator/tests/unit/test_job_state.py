"""JobState's bookkeeping of queries, with stand-ins for Spark's StreamingQuery."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fluxgate_aggregator.driver_state import JobState


@dataclass
class StandIn:
    name: str
    isActive: bool = True  # noqa: N815 - pyspark's attribute name


def test_a_failed_query_is_restarted_in_its_place() -> None:
    started: list[str] = []

    def starter(name: str) -> Any:
        def begin() -> StandIn:
            started.append(name)
            return StandIn(name)

        return begin

    state = JobState(starters={"aggregates": starter("aggregates"), "side-outputs": starter("side-outputs")})
    state.queries = [begin() for begin in state.starters.values()]
    aggregates, sides = state.queries
    sides.isActive = False

    assert state.failed() == [sides]
    again = state.restart(sides)
    assert state.queries == [aggregates, again] and again is not sides
    assert started == ["aggregates", "side-outputs", "side-outputs"]
    assert state.failed() == []


def test_each_restart_of_a_failed_query_is_counted_for_the_alert(monkeypatch: Any) -> None:
    from prometheus_client import REGISTRY

    from fluxgate_aggregator import query_supervisor
    from fluxgate_aggregator.query_supervisor import Supervisor
    from fluxgate_aggregator.settings import AggregatorSettings

    @dataclass
    class Failed(StandIn):
        def exception(self) -> str:
            return "boom"

    monkeypatch.setattr(query_supervisor.time, "sleep", lambda _: None)
    state = JobState(starters={"q": lambda: StandIn("q")})
    state.queries = [Failed("q", isActive=False)]
    before = REGISTRY.get_sample_value("fluxgate_aggregator_query_restarts_total") or 0.0

    assert Supervisor(AggregatorSettings(), state).tick()

    assert REGISTRY.get_sample_value("fluxgate_aggregator_query_restarts_total") == before + 1
    assert state.failed() == []

"""run_service's exit codes and signals, in-process and as a real process (ServiceProcess)."""

from __future__ import annotations

import gc
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fluxgate_testing import ServiceProcess, free_port

from fluxgate_core.collector import YOUNG_THRESHOLD
from fluxgate_core.lifecycle import run_service

sys.path.insert(0, str(Path(__file__).parent))
from demo_service import DemoService, DemoSettings

DEMO = Path(__file__).with_name("demo_service.py")


@pytest.fixture(autouse=True)
def collector_as_it_was() -> Iterator[None]:
    """run_service tunes this process's collector: give the other tests theirs back."""
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def run(mode: str) -> tuple[int, list[DemoService]]:
    built: list[DemoService] = []

    def build(settings: DemoSettings) -> DemoService:
        built.append(DemoService(settings))
        return built[-1]

    return run_service("demo", DemoSettings, build, overrides={"mode": mode}, quiet_loggers=["chatty"]), built


def test_a_signal_drains_and_exits_zero() -> None:
    code, built = run("self-term")
    assert code == 0 and built[0].drained


def test_a_service_runs_with_its_start_frozen_and_young_collections_rarer() -> None:
    """What was made before the service runs is out of the collector's sight; a young
    collection waits for YOUNG_THRESHOLD new objects, not 700."""
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    seen: list[tuple[int, int]] = []

    def build(settings: DemoSettings) -> DemoService:
        service = DemoService(settings)
        run_service_of = service.run

        async def run_and_look(stop: object) -> None:
            seen.append((gc.get_threshold()[0], gc.get_freeze_count()))
            await run_service_of(stop)  # type: ignore[arg-type]

        service.run = run_and_look  # type: ignore[method-assign]
        return service

    assert run_service("demo", DemoSettings, build, overrides={"mode": "self-term"}) == 0
    ((young, frozen),) = seen
    assert young == YOUNG_THRESHOLD and frozen > 1000
    assert gc.get_threshold()[1:] == (10, 10)


def test_a_raised_fluxgate_error_exits_one() -> None:
    assert run("raise")[0] == 1


def test_a_recorded_fatal_error_exits_one_after_draining() -> None:
    code, built = run("fatal")
    assert code == 1 and built[0].drained


@pytest.mark.parametrize(("mode", "said"), [("raise", "kafka said no"), ("fatal", "a record nothing takes")])
def test_as_a_process_a_failure_is_one_log_line_and_exit_one(tmp_path: Path, mode: str, said: str) -> None:
    port = free_port()
    env = {"DEMO_HTTP__PORT": str(port), "DEMO_MODE": mode}
    with ServiceProcess([sys.executable, str(DEMO)], env, health_port=port, log_path=tmp_path / "demo.log") as demo:
        assert demo.start(wait_ready=False).wait(30) == 1
        failures = [line for line in demo.log_text().splitlines() if "level=error" in line]
        assert len(failures) == 1 and said in failures[0] and "error_class=DeliveryError" in failures[0]


def test_bad_configuration_exits_two_with_one_line_naming_the_variable(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEMO_HTTP__PORT", "many")
    code, built = run("clean")
    assert code == 2 and built == []
    lines = capfd.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "DEMO_HTTP__PORT" in lines[0] and "many" in lines[0]


def test_as_a_process_ready_metrics_and_a_clean_sigterm(tmp_path: Path) -> None:
    port = free_port()
    env = {"DEMO_HTTP__PORT": str(port), "DEMO_LOG__JSON_OUTPUT": "true"}
    with ServiceProcess([sys.executable, str(DEMO)], env, health_port=port, log_path=tmp_path / "demo.log") as demo:
        demo.start(timeout=30)
        assert demo.ready()
        assert "process_max_fds" in demo.metrics()
        assert demo.metric("python_info", implementation="CPython") == 1.0
        assert demo.terminate() == 0
        assert "draining" in demo.log_text() and "shutdown.draining" in demo.log_text()


def test_a_second_signal_forces_exit_one_while_draining(tmp_path: Path) -> None:
    port = free_port()
    demo = ServiceProcess(
        [sys.executable, str(DEMO)], {"DEMO_HTTP__PORT": str(port), "DEMO_MODE": "stuck"}, health_port=port
    )
    with demo.start(timeout=30):
        demo.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        demo.wait_until(lambda: "draining" in demo.log_text(), "the drain to start")
        assert demo.signal(signal.SIGINT) == 1
        assert "shutdown.forced" in demo.log_text()
    demo.kill()  # safe once it exited

"""`make run SECURED=1` end to end: simulated devices over MQTT and CoAP, both gateways, the
Spark job, the three persisters, device-status and the console, on the local stack, every
hop secured: every service logging in to Kafka's SASL_SSL listener as its own principal
allowed only what it needs (ACLs: a grant missing from `SERVICE_GRANTS` stops its service,
and the run fails), to the registry over HTTPS as its own Keycloak client, and the persisters
and the console to Elasticsearch and Cassandra over TLS as their own users; the run's
Prometheus has scraped every metric an alert reads, and its FluxgateServiceDown alert fires
while a persister of the run is stopped;
readings, dead letters and aggregates must all reach Kafka, every aggregate must equal its
window recomputed independently from the readings (a reading ends counted or late, never
both, never neither), every store must hold what the topic holds once the run stops
upstream first, and every service must stop cleanly on SIGTERM; and Ctrl-C stops every
child even when stdout is already gone."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from fluxgate_testing import free_port
from fluxgate_testing.browser import chromium, screenshot
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

# fixed_names: the whole pipeline with its default topics, groups and ports, as `make run` has them
pytestmark = [pytest.mark.integration, pytest.mark.paired, pytest.mark.fixed_names]

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = "http://127.0.0.1:9108/"  # run_pipeline.py --console-port's default
# run_pipeline --no-aggregator's longest stop: the gateways' drain wait (90 s) and 30 s for each
# of its five children before a SIGKILL.
STOP_BOUND_S = 90 + 5 * 30


# The run's own waits: up to 150 s for each of the console's checks, 180 s for the alert, 240 s
# to stop. 493 s beside two other engineers' tests (load average 7), where the aggregator's
# first aggregate came after 200 s: the run's --duration is its bound, not its length.
@pytest.mark.spark
@pytest.mark.timeout(1000)
def test_make_run_moves_readings_to_aggregates(stack: Any, fates: Any, tmp_path: Path) -> None:
    coap_port = free_port(socket.SOCK_DGRAM)
    aggregates_before = fates.aggregated_until_now()
    # The run's readings are at most --late-by (15 s) behind its start; older windows are earlier tests'.
    run_windows_from_ms = int(time.time() * 1000) - 60_000
    released, out, err = tmp_path / "browser-done", tmp_path / "run.out", tmp_path / "run.err"
    with out.open("w") as stdout, err.open("w") as stderr:
        run = subprocess.Popen(
            [sys.executable, str(ROOT / "tools" / "run_pipeline.py"), "--secured", "--check", "--until-checked", "1001",
             "--until-released", str(released),
             "--duration", "720", "--window", "5 seconds", "--watermark", "5 seconds", "--malformed", "0.05",
             # Late readings land in windows the aggregator has just closed, up to the run's end.
             "--late", "0.03", "--late-by", "15",
             "--coap-port", str(coap_port)],
            stdout=stdout, stderr=stderr, text=True,
        )  # fmt: skip
        try:
            watch_the_console(CONSOLE, stack.bootstrap)
            a_stopped_persister_fires_service_down(out, stack.prometheus_url)
        finally:
            released.touch()
            run.wait(timeout=240)
    result = subprocess.CompletedProcess(run.args, run.returncode, out.read_text(), err.read_text())
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert result.returncode == 0, f"{summary}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert summary["arrived"]["sensors.readings"] > 1000, summary
    services = ["aggregator", "coap-ingest", "device-status", "es-persister", "hazelcast-persister", "mqtt-proxy"]
    services += ["scylla-persister", "console"]
    assert summary["exits"] == dict.fromkeys([*services, "simulator"], 0)
    assert summary["devices"].get("ONLINE", 0) > 0, summary  # device-status saw the simulated devices
    for store in ("elasticsearch", "scylla", "hazelcast"):  # aggregates reached every store, during this run
        assert summary["documents"][store] > 0, summary
    # Stopped upstream first: each stage processed all the one before it wrote, so every
    # store holds what the topic holds.
    assert all(wait.startswith("caught up") for name, wait in summary["drained"].items() if name != "gateways"), summary
    assert set(summary["documents"].values()) == {summary["arrived"]["temperatures.aggregated"]}, summary
    assert summary["arrived"]["temperatures.late"] > 0, summary
    assert fates.wrong_aggregates(5_000, aggregates_before, run_windows_from_ms) == []
    # Both gateway hops delivered, secured: MQTT over TLS with a client certificate, CoAP over DTLS.
    protocols = fates.readings_by_protocol(run_windows_from_ms)
    assert protocols["MQTT"] > 0 and protocols["COAP"] > 0, protocols


def watch_the_console(url: str, bootstrap: str) -> None:
    """The console of this `make run` in a real browser, while it runs: every stage ready, a
    dead letter of a real gateway with its reason, Elasticsearch's newest aggregate on the
    page, and a replay round trip; the screenshot is kept in .local/artifacts/console-make-run.png."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    stages = {"mqtt-proxy", "coap-ingest", "aggregator", "device-status"}
    stages |= {"es-persister", "scylla-persister", "hazelcast-persister"}
    with chromium() as browser:
        # The page replaces its parts at every refresh: an element found a moment ago may be gone.
        wait = WebDriverWait(browser, 150, poll_frequency=1, ignored_exceptions=[StaleElementReferenceException])
        wait.until(lambda _: page_loads(browser, url))

        def all_ready(_: Any) -> bool:
            ready = browser.find_elements(By.CSS_SELECTOR, ".stage.ready")
            return {e.get_attribute("data-service") for e in ready} == stages

        wait.until(all_ready, "every stage ready")
        newest = 'tr[data-letter^="sensors.deadletter/"]'
        letter = wait.until(lambda _: browser.find_element(By.CSS_SELECTOR, newest).text)
        assert "PayloadError" in letter and ("not valid JSON" in letter or "no numeric field" in letter), letter
        # Elasticsearch keeps earlier runs' aggregates: wait for one of a window of this run's.
        started = datetime.now(UTC) - timedelta(seconds=5)  # the run's 5-second windows start on the 5 s

        def this_runs_aggregate(_: Any) -> bool:
            store = browser.find_element(By.CSS_SELECTOR, '[data-store="elasticsearch"]').text
            window = re.search(r"newest aggregate: .* window (\S+)", store)
            return window is not None and datetime.fromisoformat(window.group(1)) >= started

        wait.until(this_runs_aggregate, "an aggregate of this run in Elasticsearch")
        flow = wait.until(lambda _: browser.find_element(By.ID, "flow").text)
        assert "(down)" not in flow, flow  # every persister's store up, before and after its first write
        screenshot(browser, "console-make-run.png")
        replay_round_trip(browser, wait, bootstrap)


def a_stopped_persister_fires_service_down(run_out: Path, prometheus: str) -> None:
    """The shipped FluxgateServiceDown rule is evaluated by the stack's real Prometheus against
    the run's hazelcast-persister, stopped (SIGSTOP: its scrapes time out, as a hung process's
    would): the alert becomes pending for it, with its labels and runbook. Its 2 minutes in
    pending before firing are the rule file's own, proven by promtool on the same file
    (tests/alerts/rules_test.yaml); waiting them out here cost the serial phase ~2 minutes.
    Continued, the persister catches up: the run's own check then finds every store holding
    what the topic holds."""
    started = re.search(r"started hazelcast-persister\s+pid (\d+)", run_out.read_text())
    assert started, run_out.read_text()[-2000:]
    pid = int(started.group(1))

    def raised() -> list[Any]:
        reply = httpx.get(f"{prometheus}/api/v1/alerts", timeout=10)
        reply.raise_for_status()
        return [
            alert
            for alert in reply.json()["data"]["alerts"]
            if alert["labels"].get("fluxgate_service") == "hazelcast-persister"
            and alert["state"] in {"pending", "firing"}
        ]

    os.kill(pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 60  # a scrape's timeout, then an evaluation
        while not (alerts := raised()):
            assert time.monotonic() < deadline, "FluxgateServiceDown was not raised for the stopped persister"
            time.sleep(2)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert [a["labels"]["alertname"] for a in alerts] == ["FluxgateServiceDown"], alerts
    assert alerts[0]["labels"]["severity"] == "critical", alerts
    assert alerts[0]["annotations"]["runbook_url"] == "docs/runbooks/FluxgateServiceDown.md"


def replay_round_trip(browser: Any, wait: Any, bootstrap: str) -> None:
    """A record the aggregator cannot decode, dead-lettered by it, replayed from the page back
    to `sensors.readings` (found there a second time, after the original); replayed twice, it is
    sent once. (The gateways' letters come from MQTT topics: not replayable to Kafka.) Not
    Confluent's wire format, so every checker skips it."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions

    marker = f"replay me {uuid.uuid4().hex}".encode()
    producer, placed = Producer({"bootstrap.servers": bootstrap}), []
    producer.produce("sensors.readings", marker, b"console-replay", on_delivery=lambda _, m: placed.append(m))
    assert producer.flush(10) == 0 and placed[0].error() is None
    source = browser.find_element(By.CSS_SELECTOR, '#filter input[name="source"]')
    source.send_keys("sensors.readings/")  # only letters read from Kafka: the gateways' flood the newest
    browser.find_element(By.CSS_SELECTOR, '#filter button[type="submit"]').click()
    rows = f'//tr[starts-with(@data-letter, "sensors.deadletter/")][contains(., "{marker.decode()}")]'
    letter = wait.until(lambda _: browser.find_element(By.XPATH, rows).get_attribute("data-letter"), "the letter")

    def replay(confirmed: bool) -> str:
        browser.execute_script("document.getElementById('replay-result').textContent = ''")
        wait.until(lambda _: pick(browser, letter), "the letter picked")
        browser.find_element(By.ID, "replay-selected").click()
        if confirmed:
            # The dialog alone is waited for: reading the page while it is open would make
            # chromedriver dismiss it (W3C's default unhandledPromptBehavior), cancelling the
            # replay. Only once none came is the page read, for the answer it gave instead.
            try:
                asked = wait.until(expected_conditions.alert_is_present(), "the confirm dialog")
            except TimeoutException:
                raise AssertionError(f"no confirm dialog; the page said: {replay_result(browser)!r}") from None
            asked.accept()
        return str(wait.until(lambda _: replay_result(browser)))

    first = replay(confirmed=True)
    assert re.fullmatch(r"Replay \S+: sent 1, 0 replayed before, 0 not replayable\.", first), first
    again = replay(confirmed=False)
    assert again == "Nothing to send: 1 replayed before, 0 not replayable.", again
    # Same key, same partition: the replayed copy follows the original there, bytes and key as they were.
    copies = records_from(bootstrap, "sensors.readings", placed[0].partition(), placed[0].offset())
    assert [(m.key(), m.value()) for m in copies if m.value() == marker] == [(b"console-replay", marker)] * 2


def records_from(bootstrap: str, topic: str, partition: int, offset: int) -> list[Any]:
    """Every record of one partition from ``offset`` to its end now."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"replay-check-{uuid.uuid4().hex[:6]}"})
    try:
        end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
        consumer.assign([TopicPartition(topic, partition, offset)])
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while (not got or got[-1].offset() < end - 1) and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                got.append(message)
        return got
    finally:
        consumer.close()


def replay_result(browser: Any) -> str:
    return str(browser.find_element("id", "replay-result").text)


def pick(browser: Any, letter: str) -> bool:
    """Tick the letter's box (the page's script keeps it ticked across refreshes)."""
    box = browser.find_element("css selector", f'tr[data-letter="{letter}"] input.pick')
    if not box.is_selected():
        box.click()
    return bool(box.is_selected())


def page_loads(browser: Any, url: str) -> bool:
    try:
        browser.get(url)
    except WebDriverException:  # the console is not listening yet
        return False
    return bool(browser.find_elements("id", "flow"))


def test_ctrl_c_stops_every_child_when_stdout_is_a_closed_pipe(stack: Any, tmp_path: Path) -> None:
    """`make run | tee run.log`, then Ctrl-C: the interrupt ends tee first, so every later write
    to stdout fails; the children, in sessions of their own, must still all be stopped. (SIGTERM
    takes the same path: its handler raises KeyboardInterrupt.)"""
    coap_port = free_port(socket.SOCK_DGRAM)
    with (tmp_path / "stderr").open("wb") as stderr:
        run = subprocess.Popen(
            [sys.executable, str(ROOT / "tools" / "run_pipeline.py"), "--no-aggregator", "--coap-port", str(coap_port)],
            stdout=subprocess.PIPE, stderr=stderr,
            # Started as a shell's background job is (SIGINT ignored): Ctrl-C must still stop it.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )  # fmt: skip
    children: list[int] = []
    try:
        children = started_children(run)
        assert run.stdout is not None
        run.stdout.close()  # tee is gone
        run.send_signal(signal.SIGINT)
        # What this test is about is that every child is stopped, not how fast: the bound is
        # run_pipeline's own for this run (the gateways' drain wait, then 30 s per child before
        # its SIGKILL). Its stop report (which wait took how long, each exit) is on stderr.
        try:
            run.wait(timeout=STOP_BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"not stopped in {STOP_BOUND_S} s; where it waits:\n{where_it_waits(run, tmp_path / 'stderr')}")
        report = (tmp_path / "stderr").read_text()
        alive = [pid for pid in children if session_alive(pid)]
        assert not alive, f"still running after the pipeline exited: {alive}\n{report}"
        assert "stopped mqtt-proxy" in report, report  # the report reached stderr with stdout gone
    finally:
        if run.poll() is None:
            run.kill()
        for pid in children:
            kill_session(pid)  # so a failing run leaves nothing behind


def where_it_waits(run: subprocess.Popen[bytes], stderr: Path) -> str:
    """run_pipeline's threads' stacks (it dumps them on SIGUSR1), and which of its children still run."""
    run.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while "File " not in stderr.read_text(errors="replace") and time.monotonic() < deadline:
        time.sleep(0.2)
    children = subprocess.run(
        ["ps", "--ppid", str(run.pid), "-o", "pid,stat,etime,args"], capture_output=True, text=True
    )
    return f"{stderr.read_text(errors='replace')}\nits children:\n{children.stdout}"


def started_children(run: subprocess.Popen[bytes]) -> list[int]:
    """Pids from the `started <name> pid <n>` lines, read until the first status line (the
    first flushed write: stdout is a pipe, so block-buffered)."""
    assert run.stdout is not None
    pids: list[int] = []
    for raw in iter(run.stdout.readline, b""):
        line = raw.decode(errors="replace")
        if found := re.match(r"started \S+\s+pid (\d+)", line):
            pids.append(int(found[1]))
        if line.startswith("["):
            return pids
    raise AssertionError(f"run_pipeline ended before its first status line (exit {run.wait()})")


def session_alive(session: int) -> bool:
    """Any live (non-zombie) process in the session a child leads: the child or what it forked."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            return True
    return False


def kill_session(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while session_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)

"""The CLI without the network: the resource list for coap-ingest, and option checking."""

from __future__ import annotations

import json
import socket

from typer.testing import CliRunner

from fluxgate_sim.cli import app


def test_coap_resources_prints_coap_ingest_config() -> None:
    result = CliRunner().invoke(
        app, ["coap-resources", "--coap-devices", "2", "--metrics", "temperature,humidity", "--coap-port", "5999"]
    )
    assert result.exit_code == 0, result.output
    resources = json.loads(result.stdout)
    assert [r["uri"] for r in resources] == [
        "coap://127.0.0.1:5999/sensors/coap-0001/temperature",
        "coap://127.0.0.1:5999/sensors/coap-0001/humidity",
        "coap://127.0.0.1:5999/sensors/coap-0002/temperature",
        "coap://127.0.0.1:5999/sensors/coap-0002/humidity",
    ]
    assert all(r["device_from"] == "path:1" and r["metric_from"] == "path:2" for r in resources)


def test_coap_resources_with_a_topic() -> None:
    result = CliRunner().invoke(app, ["coap-resources", "--metrics", "brightness", "--topic", "t1"])
    assert json.loads(result.stdout) == [
        {
            "uri": "coap://127.0.0.1:5683/sensors/coap-0001/brightness",
            "device_from": "path:1",
            "metric_from": "path:2",
            "topic": "t1",
        }
    ]


def test_bad_options_are_refused() -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["run", "--malformed", "1.5"]).exit_code == 2
    result = runner.invoke(app, ["run", "--coap-devices", "1", "--metrics", "pressure", "--count", "1"])
    assert result.exit_code == 2
    assert "metrics must be among" in result.output


def test_a_coap_port_in_use_is_one_clear_line() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["run", "--coap-devices", "1", "--coap-port", str(port), "--count", "1"])
    assert result.exit_code == 1
    assert f"fluxgate-sim: [Errno 98] cannot serve CoAP on udp 127.0.0.1:{port}: " in result.output
    assert "Traceback" not in result.output

"""``fluxgate-sim``: simulated MQTT and CoAP devices for the Fluxgate pipeline."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
from pathlib import Path
from typing import Annotated

import typer

from fluxgate_sim.coap import CoapDeviceServer
from fluxgate_sim.encoding import CoapFormat
from fluxgate_sim.faults import Faults
from fluxgate_sim.mqtt import MqttAccess
from fluxgate_sim.runner import Simulation, SimulationConfig, coap_device_names
from fluxgate_sim.signals import METRICS

app = typer.Typer(help=__doc__, no_args_is_help=True, add_completion=False)

DEFAULT_METRICS = ",".join(METRICS)


def _metrics(spec: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in spec.split(",") if part.strip())


@app.command()
def run(
    mqtt_devices: Annotated[int, typer.Option(min=0, help="simulated MQTT devices")] = 0,
    coap_devices: Annotated[int, typer.Option(min=0, help="simulated CoAP devices")] = 0,
    rate: Annotated[float, typer.Option(min=0.001, help="readings per device per second (each metric)")] = 1.0,
    count: Annotated[int | None, typer.Option(min=1, help="stop after this many ticks")] = None,
    duration: Annotated[float | None, typer.Option(min=0.0, help="stop after this many seconds")] = None,
    metrics: Annotated[str, typer.Option(help="comma-separated metrics per device")] = DEFAULT_METRICS,
    out_of_order: Annotated[float, typer.Option(min=0.0, max=1.0, help="fraction sent after a newer one")] = 0.0,
    late: Annotated[float, typer.Option(min=0.0, max=1.0, help="fraction stamped --late-by-s in the past")] = 0.0,
    late_by_s: Annotated[float, typer.Option(min=0.0, help="how far in the past late readings are")] = 300.0,
    duplicates: Annotated[float, typer.Option(min=0.0, max=1.0, help="fraction sent twice")] = 0.0,
    malformed: Annotated[float, typer.Option(min=0.0, max=1.0, help="fraction broken (bad JSON, text values)")] = 0.0,
    seed: Annotated[int | None, typer.Option(help="random seed for reproducible runs")] = None,
    day_seconds: Annotated[float, typer.Option(min=1.0, help="period of the daily cycle")] = 86_400.0,
    mqtt_host: Annotated[str, typer.Option(help="MQTT broker host")] = "127.0.0.1",
    mqtt_port: Annotated[int, typer.Option(help="MQTT broker port")] = 1883,
    qos: Annotated[int, typer.Option(min=0, max=2, help="MQTT QoS")] = 1,
    mqtt_connections: Annotated[int, typer.Option(min=1, help="shared MQTT connections")] = 1,
    mqtt_senml: Annotated[bool, typer.Option(help="publish SenML packs to devices/<device>/senml instead")] = False,
    coap_host: Annotated[str, typer.Option(help="CoAP bind host")] = "127.0.0.1",
    coap_port: Annotated[int, typer.Option(min=0, max=65535, help="CoAP bind port (0: a free one)")] = 5683,
    coap_format: Annotated[str, typer.Option(help="json | senml-json | senml-cbor")] = "json",
    device_prefix: Annotated[str, typer.Option(help="prefix of every device name")] = "",
    mqtt_root: Annotated[str, typer.Option(help="MQTT topics are <root>/<device>/<metric>")] = "sensors",
    ledger: Annotated[Path | None, typer.Option(help="append every emission sent to this JSON-lines file")] = None,
    mqtt_ca_file: Annotated[Path | None, typer.Option(help="TLS to the broker, verified with this CA")] = None,
    mqtt_cert_file: Annotated[Path | None, typer.Option(help="the devices' client certificate (PEM)")] = None,
    mqtt_key_file: Annotated[Path | None, typer.Option(help="its private key (PEM)")] = None,
    mqtt_username: Annotated[str | None, typer.Option(help="the devices' broker user")] = None,
    mqtt_password_file: Annotated[Path | None, typer.Option(help="file holding its password")] = None,
) -> None:
    """Run the simulated devices until --count ticks, --duration seconds or Ctrl-C."""
    logging.basicConfig(level=logging.WARNING)
    try:
        faults = Faults(out_of_order, late, duplicates, malformed, late_by_ms=round(late_by_s * 1000))
        config = SimulationConfig(
            mqtt_devices=mqtt_devices, coap_devices=coap_devices, rate=rate, count=count, duration=duration,
            metrics=_metrics(metrics), faults=faults, seed=seed, day_seconds=day_seconds,
            mqtt_host=mqtt_host, mqtt_port=mqtt_port, mqtt_qos=qos, mqtt_connections=mqtt_connections,
            mqtt_senml=mqtt_senml, coap_host=coap_host, coap_port=coap_port, coap_format=_coap_format(coap_format),
            device_prefix=device_prefix, mqtt_root=mqtt_root, ledger=ledger,
            mqtt_access=MqttAccess(mqtt_ca_file, mqtt_cert_file, mqtt_key_file, mqtt_username, mqtt_password_file),
        )  # fmt: skip
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    simulation = Simulation(config)
    if simulation.coap:
        typer.echo(
            f"coap: {len(simulation.coap)} devices on coap://{coap_host}:{simulation.coap_server.port}", err=True
        )
    try:
        stats = asyncio.run(_run_until_signal(simulation))
    except OSError as exc:  # a CoAP port in use, a broker that refuses: one line, not a traceback
        typer.echo(f"fluxgate-sim: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(json.dumps({"sent": dict(stats)}, sort_keys=True))


@app.command("coap-resources")
def coap_resources(
    coap_devices: Annotated[int, typer.Option(min=0, help="simulated CoAP devices (0: an empty list)")] = 1,
    metrics: Annotated[str, typer.Option(help="comma-separated metrics per device")] = DEFAULT_METRICS,
    coap_host: Annotated[str, typer.Option(help="host coap-ingest reaches the simulator at")] = "127.0.0.1",
    coap_port: Annotated[int, typer.Option(min=1, max=65535, help="the simulator's CoAP port")] = 5683,
    device_prefix: Annotated[str, typer.Option(help="prefix of every device name")] = "",
    topic: Annotated[str | None, typer.Option(help="Kafka topic for every resource")] = None,
) -> None:
    """Print the JSON resource list for coap-ingest (FLUXGATE_COAP_RESOURCES)."""
    config = SimulationConfig(coap_devices=coap_devices, metrics=_metrics(metrics), device_prefix=device_prefix)
    server = CoapDeviceServer(coap_host, coap_port)
    for name in coap_device_names(config):
        server.add_device(name, config.metrics)
    resources: list[dict[str, str]] = server.resources_config()
    if topic:
        resources = [{**resource, "topic": topic} for resource in resources]
    typer.echo(json.dumps(resources))


def _coap_format(value: str) -> CoapFormat:
    if value not in ("json", "senml-json", "senml-cbor"):
        raise ValueError(f"--coap-format must be json, senml-json or senml-cbor, got {value!r}")
    return value  # type: ignore[return-value]


async def _run_until_signal(simulation: Simulation) -> dict[str, int]:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signum, stop.set)
    return dict(await simulation.run(stop))

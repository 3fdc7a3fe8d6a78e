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

from fluxgate_sim.coap import CoapDeviceServer, CoapPsk
from fluxgate_sim.encoding import CoapFormat
from fluxgate_sim.faults import Faults
from fluxgate_sim.fleet import MAX_COAP_DEVICES, Fleet, FleetConfig, fleet_coap_names
from fluxgate_sim.mqtt import MqttAccess
from fluxgate_sim.runner import Simulation, SimulationConfig, coap_device_names
from fluxgate_sim.signals import METRICS

app = typer.Typer(help=__doc__, no_args_is_help=True, add_completion=False)

DEFAULT_METRICS = ",".join(METRICS)
# Options both commands take, said once.
CoapHost = Annotated[str, typer.Option(help="CoAP bind host")]
CoapPort = Annotated[int, typer.Option(min=0, max=65535, help="CoAP bind port (0: a free one)")]
CoapFormatName = Annotated[str, typer.Option(help="json | senml-json | senml-cbor")]
Late = Annotated[float, typer.Option(min=0.0, max=1.0, help="fraction stamped --late-by-s in the past")]
LateByS = Annotated[float, typer.Option(min=0.0, help="how far in the past late readings are")]
Duplicates = Annotated[float, typer.Option(min=0.0, max=1.0, help="fraction sent twice")]
Malformed = Annotated[float, typer.Option(min=0.0, max=1.0, help="fraction broken (bad JSON, text values)")]
Seed = Annotated[int | None, typer.Option(help="random seed for reproducible runs")]
DaySeconds = Annotated[float, typer.Option(min=1.0, help="period of the daily cycle")]
MqttHost = Annotated[str, typer.Option(help="MQTT broker host")]
MqttPort = Annotated[int, typer.Option(help="MQTT broker port")]
Qos = Annotated[int, typer.Option(min=0, max=2, help="MQTT QoS")]
DevicePrefix = Annotated[str, typer.Option(help="prefix of every device name")]
MqttRoot = Annotated[str, typer.Option(help="MQTT topics are <root>/<device>/<metric>")]
LedgerPath = Annotated[Path | None, typer.Option(help="append every emission sent to this JSON-lines file")]
MqttCaFile = Annotated[Path | None, typer.Option(help="TLS to the broker, verified with this CA")]
MqttCertFile = Annotated[Path | None, typer.Option(help="the devices' client certificate (PEM)")]
MqttKeyFile = Annotated[Path | None, typer.Option(help="its private key (PEM)")]
MqttUsername = Annotated[str | None, typer.Option(help="the devices' broker user")]
MqttPasswordFile = Annotated[Path | None, typer.Option(help="file holding its password")]
CoapPskIdentity = Annotated[str | None, typer.Option(help="serve CoAP over DTLS (coaps://) to this PSK identity")]
CoapPskFile = Annotated[Path | None, typer.Option(help="file holding its pre-shared key")]


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
    late: Late = 0.0,
    late_by_s: LateByS = 300.0,
    duplicates: Duplicates = 0.0,
    malformed: Malformed = 0.0,
    seed: Seed = None,
    day_seconds: DaySeconds = 86_400.0,
    mqtt_host: MqttHost = "127.0.0.1",
    mqtt_port: MqttPort = 1883,
    qos: Qos = 1,
    mqtt_connections: Annotated[int, typer.Option(min=1, help="shared MQTT connections")] = 1,
    mqtt_senml: Annotated[bool, typer.Option(help="publish SenML packs to devices/<device>/senml instead")] = False,
    coap_host: CoapHost = "127.0.0.1",
    coap_port: CoapPort = 5683,
    coap_format: CoapFormatName = "json",
    device_prefix: DevicePrefix = "",
    mqtt_root: MqttRoot = "sensors",
    ledger: LedgerPath = None,
    mqtt_ca_file: MqttCaFile = None,
    mqtt_cert_file: MqttCertFile = None,
    mqtt_key_file: MqttKeyFile = None,
    mqtt_username: MqttUsername = None,
    mqtt_password_file: MqttPasswordFile = None,
    coap_psk_identity: CoapPskIdentity = None,
    coap_psk_file: CoapPskFile = None,
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
            coap_psk=_coap_psk(coap_psk_identity, coap_psk_file),
        )  # fmt: skip
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    simulation = Simulation(config)
    if simulation.coap:
        server = simulation.coap_server
        typer.echo(f"coap: {len(simulation.coap)} devices on {server.scheme}://{coap_host}:{server.port}", err=True)
    try:
        stats = asyncio.run(_run_until_signal(simulation))
    except OSError as exc:  # a CoAP port in use, a broker that refuses: one line, not a traceback
        typer.echo(f"fluxgate-sim: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(json.dumps({"sent": dict(stats)}, sort_keys=True))


@app.command()
def fleet(
    devices: Annotated[int, typer.Option(min=1, help="devices, ids fleet-0000001...")] = 1000,
    period: Annotated[
        float, typer.Option(min=0.001, help="seconds between a device's reports (rate: devices/period)")
    ] = 60.0,
    jitter: Annotated[
        float, typer.Option(min=0.0, max=0.499, help="each report within ±jitter*period of its slot")
    ] = 0.1,
    duration: Annotated[float | None, typer.Option(min=0.0, help="stop after this many seconds")] = None,
    metrics: Annotated[str, typer.Option(help="comma-separated metrics per report")] = "temperature",
    out_of_order: Annotated[float, typer.Option(min=0.0, max=1.0, help="fraction sent after the device's next")] = 0.0,
    late: Late = 0.0,
    late_by_s: LateByS = 300.0,
    duplicates: Duplicates = 0.0,
    malformed: Malformed = 0.0,
    seed: Seed = None,
    day_seconds: DaySeconds = 86_400.0,
    mqtt_host: MqttHost = "127.0.0.1",
    mqtt_port: MqttPort = 1883,
    qos: Qos = 1,
    mqtt_connections: Annotated[int, typer.Option(min=1, help="hubs: connections the devices share")] = 4,
    device_prefix: DevicePrefix = "",
    mqtt_root: MqttRoot = "sensors",
    ledger: LedgerPath = None,
    report_every: Annotated[float, typer.Option(min=0.1, help="seconds between progress lines")] = 5.0,
    coap_devices: Annotated[
        int, typer.Option(min=0, max=MAX_COAP_DEVICES, help="the last ids speak CoAP (coap-resources --fleet-devices)")
    ] = 0,
    coap_host: CoapHost = "127.0.0.1",
    coap_port: CoapPort = 5683,
    coap_format: CoapFormatName = "json",
    shard: Annotated[str, typer.Option(help="i/n: run the ids i, i+n, i+2n... (n processes share a fleet)")] = "0/1",
    mqtt_ca_file: MqttCaFile = None,
    mqtt_cert_file: MqttCertFile = None,
    mqtt_key_file: MqttKeyFile = None,
    mqtt_username: MqttUsername = None,
    mqtt_password_file: MqttPasswordFile = None,
    coap_psk_identity: CoapPskIdentity = None,
    coap_psk_file: CoapPskFile = None,
) -> None:
    """Run a fleet: --devices reporting every --period seconds over --mqtt-connections hubs."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("fluxgate_sim.fleet").setLevel(logging.INFO)
    try:
        faults = Faults(out_of_order, late, duplicates, malformed, late_by_ms=round(late_by_s * 1000))
        config = FleetConfig(
            devices=devices, period=period, jitter=jitter, duration=duration, metrics=_metrics(metrics),
            faults=faults, seed=seed, day_seconds=day_seconds, mqtt_host=mqtt_host, mqtt_port=mqtt_port,
            mqtt_qos=qos, mqtt_connections=mqtt_connections, mqtt_root=mqtt_root, device_prefix=device_prefix,
            ledger=ledger, report_every=report_every, coap_devices=coap_devices, coap_host=coap_host,
            coap_port=coap_port, coap_format=_coap_format(coap_format), shard=_shard(shard),
            mqtt_access=MqttAccess(mqtt_ca_file, mqtt_cert_file, mqtt_key_file, mqtt_username, mqtt_password_file),
            coap_psk=_coap_psk(coap_psk_identity, coap_psk_file),
        )  # fmt: skip
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    fleet = Fleet(config)
    if coap_devices:
        server = fleet.coap_server
        typer.echo(f"coap: {coap_devices} devices on {server.scheme}://{coap_host}:{server.port}", err=True)
    try:
        stats = asyncio.run(_run_until_signal(fleet))
    except OSError as exc:  # a broker that refuses: one line, not a traceback
        typer.echo(f"fluxgate-sim: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(json.dumps({"sent": dict(stats)}, sort_keys=True))


@app.command("coap-resources")
def coap_resources(
    coap_devices: Annotated[int, typer.Option(min=0, help="simulated CoAP devices (0: an empty list)")] = 1,
    metrics: Annotated[str, typer.Option(help="comma-separated metrics per device")] = DEFAULT_METRICS,
    coap_host: Annotated[str, typer.Option(help="host coap-ingest reaches the simulator at")] = "127.0.0.1",
    coap_port: Annotated[int, typer.Option(min=1, max=65535, help="the simulator's CoAP port")] = 5683,
    device_prefix: DevicePrefix = "",
    topic: Annotated[str | None, typer.Option(help="Kafka topic for every resource")] = None,
    fleet_devices: Annotated[int, typer.Option(min=0, help="a fleet's devices: its last --coap-devices ids")] = 0,
    coaps: Annotated[bool, typer.Option(help="coaps:// URIs: the devices serve DTLS (--coap-psk-identity)")] = False,
) -> None:
    """Print the JSON resource list for coap-ingest (FLUXGATE_COAP_RESOURCES)."""
    config = SimulationConfig(coap_devices=coap_devices, metrics=_metrics(metrics), device_prefix=device_prefix)
    server = CoapDeviceServer(coap_host, coap_port)
    names = coap_device_names(config)
    if fleet_devices:
        names = fleet_coap_names(fleet_devices, min(coap_devices, fleet_devices), device_prefix)
    for name in names:
        server.add_device(name, config.metrics)
    resources: list[dict[str, str]] = server.resources_config(scheme="coaps" if coaps else None)
    if topic:
        resources = [{**resource, "topic": topic} for resource in resources]
    typer.echo(json.dumps(resources))


def _shard(value: str) -> tuple[int, int]:
    index, _, count = value.partition("/")
    if not (index.isdigit() and count.isdigit()):
        raise ValueError(f"--shard is i/n, e.g. 0/2, got {value!r}")
    return int(index), int(count)


def _coap_psk(identity: str | None, key_file: Path | None) -> CoapPsk | None:
    if (identity is None) != (key_file is None):
        raise ValueError("--coap-psk-identity and --coap-psk-file go together")
    return None if identity is None or key_file is None else CoapPsk.from_file(identity, key_file)


def _coap_format(value: str) -> CoapFormat:
    if value not in ("json", "senml-json", "senml-cbor"):
        raise ValueError(f"--coap-format must be json, senml-json or senml-cbor, got {value!r}")
    return value  # type: ignore[return-value]


async def _run_until_signal(simulation: Simulation | Fleet) -> dict[str, int]:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signum, stop.set)
    return dict(await simulation.run(stop))

"""Simulated CoAP devices: one aiocoap server on one port, hosting every device's resources.

One server for all devices scales where one server per device would not: a thousand
devices need one UDP socket and one event loop instead of a thousand ports, and the
gateway sees exactly what it would see from a CoAP proxy or a border router serving
many constrained nodes. Each device's metric is its own OBSERVABLE resource,
``/sensors/<device>/<metric>``, which notifies its observers on every new reading.

With a :class:`CoapPsk` the server speaks CoAP over DTLS (``coaps://``) with that pre-shared
key instead, through aiocoap's own tinydtls server transport; plain CoAP is then not served.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import aiocoap
import aiocoap.resource as coap_resource
from aiocoap.credentials import CredentialsMap
from aiocoap.defaults import dtls_missing_modules
from aiocoap.numbers import COAP_PORT, COAPS_PORT

from fluxgate_sim.encoding import CONTENT_FORMATS, CoapFormat, coap_payload
from fluxgate_sim.faults import Reading

BLOCK_SIZE_EXP = 6  # Block2 SZX 6: 1024-byte blocks, aiocoap's own size over UDP
# How long a stopping device still answers: more than a confirmable notification's first
# acknowledgement timeout (2 s, RFC 7252), so its observer's acknowledgement finds the port open.
STOP_LINGER_S = 3.0
BLOCK_BYTES = 2 ** (BLOCK_SIZE_EXP + 4)
# aiocoap's tinydtls server binds the port it is given plus this (5683 -> 5684, as libcoap's -p
# does): it is given the port below the one asked for, so that DTLS is served on that one.
DTLS_PORT_OFFSET = COAPS_PORT - COAP_PORT
# DTLSSocket's tinydtls builds the pre-master secret (2 + N + 2 + N bytes, RFC 4279) in a 40-byte
# buffer: a key over 18 bytes makes every handshake fail without a word (measured: 18 works,
# 19 does not, against aiocoap's client and libcoap's coap-client-openssl alike).
MAX_PSK_BYTES = 18
MAX_PSK_IDENTITY_BYTES = 32  # tinydtls's DTLS_PSK_MAX_CLIENT_IDENTITY_LEN


@dataclass(frozen=True)
class CoapPsk:
    """DTLS with a pre-shared key: the identity the gateway presents, and the key (read from a
    file, as a mounted Secret gives it; never on the command line, where ``ps`` shows it)."""

    identity: str
    key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not 0 < len(self.identity.encode()) <= MAX_PSK_IDENTITY_BYTES:
            raise ValueError(f"--coap-psk-identity must be 1 to {MAX_PSK_IDENTITY_BYTES} bytes")
        if not 0 < len(self.key) <= MAX_PSK_BYTES:
            size = len(self.key)
            raise ValueError(f"the pre-shared key (--coap-psk-file) must be 1 to {MAX_PSK_BYTES} bytes, not {size}")
        missing = dtls_missing_modules()
        if missing:
            raise ValueError(f"DTLS needs {', '.join(missing)}, which is not installed (pip install DTLSSocket)")

    @classmethod
    def from_file(cls, identity: str, key_file: Path) -> CoapPsk:
        """The key is the file's content, its final line break dropped."""
        try:
            key = key_file.read_bytes().rstrip(b"\r\n")
        except OSError as exc:
            raise ValueError(f"cannot read --coap-psk-file {key_file}: {exc.strerror}") from exc
        return cls(identity, key)

    def credentials(self) -> CredentialsMap:
        """aiocoap's server credentials: this identity, this key."""
        credentials = CredentialsMap()
        credentials.load_from_dict({":gateway": {"dtls": {"psk": self.key, "client-identity": self.identity.encode()}}})
        return credentials


def free_udp_port(host: str = "127.0.0.1") -> int:
    """A UDP port nothing listens on right now (for tests and ``--coap-port 0``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class SensorResource(coap_resource.ObservableResource):  # type: ignore[misc]  # aiocoap ships no types
    """One metric of one device; GET answers the latest payload, observers get each new one."""

    def __init__(self, content_format: int) -> None:
        super().__init__()
        self.content_format = content_format
        self.payload: bytes | None = None
        self.updates = 0

    def update(self, payload: bytes, content_format: int | None = None) -> None:
        """Serve ``payload`` from now on and notify every observer."""
        self.payload = payload
        if content_format is not None:
            self.content_format = content_format
        self.updates += 1
        self.updated_state()

    @property
    def observers(self) -> int:
        return len(self._observations)

    async def needs_blockwise_assembly(self, request: aiocoap.Message) -> bool:
        return False  # render_get cuts the blocks itself: see there

    async def render_get(self, request: aiocoap.Message) -> aiocoap.Message:
        if self.payload is None:
            # No reading yet: an empty 2.05 would be a payload the gateway must reject.
            return aiocoap.Message(code=aiocoap.SERVICE_UNAVAILABLE, payload=b"no reading yet")
        # The ETag names the state, so an observer fetching the blocks of one state notices
        # when another replaced it midway (RFC 7959 §2.4) instead of assembling both.
        etag = self.updates.to_bytes(4, "big")
        response = aiocoap.Message(
            code=aiocoap.CONTENT, payload=self.payload, content_format=self.content_format, etag=etag
        )
        # aiocoap would send a notification whole (its observe path does no Block2), and a
        # datagram over the observer's receive buffer arrives truncated: so a large state goes
        # block-wise, block 0 in the notification, the others as the observer asks (RFC 7959 §3.4).
        block = request.opt.block2
        if block is not None:
            return response._extract_block(block.block_number, min(block.size_exponent, BLOCK_SIZE_EXP), BLOCK_BYTES)
        if len(self.payload) > BLOCK_BYTES:
            return response._extract_block(0, BLOCK_SIZE_EXP, BLOCK_BYTES)
        return response


class CoapDeviceServer:
    """Many simulated devices behind one CoAP endpoint; ``start`` / ``stop`` or ``async with``.
    With ``psk``, over DTLS with that pre-shared key (``coaps://``) and only so."""

    def __init__(
        self, host: str = "127.0.0.1", port: int = 5683, content_format: CoapFormat = "json", psk: CoapPsk | None = None
    ) -> None:
        self.host = host
        self.port = port or free_udp_port(host)
        if psk is not None and self.port <= DTLS_PORT_OFFSET:
            raise ValueError(f"a DTLS port must be above {DTLS_PORT_OFFSET}, got {self.port}")
        self.content_format: CoapFormat = content_format
        self.psk = psk
        self._site = coap_resource.Site()
        self._site.add_resource(
            (".well-known", "core"), coap_resource.WKCResource(self._site.get_resources_as_linkheader)
        )
        self._resources: dict[tuple[str, str], SensorResource] = {}
        self._context: aiocoap.Context | None = None

    async def start(self) -> CoapDeviceServer:
        try:
            self._context = await self._serve()
        except OSError as exc:
            what = "CoAP" if self.psk is None else "CoAP over DTLS"
            raise OSError(exc.errno, f"cannot serve {what} on udp {self.host}:{self.port}: {exc.strerror}") from exc
        return self

    async def _serve(self) -> aiocoap.Context:
        if self.psk is None:
            # UDP only, as devices serve. aiocoap's default server transports also listen for
            # CoAP over TCP on the same port number, where any process's outgoing connection
            # may hold it: the simulator then died with "address already in use".
            return await aiocoap.Context.create_server_context(
                self._site, bind=(self.host, self.port), transports=["udp6"]
            )
        return await aiocoap.Context.create_server_context(
            self._site,
            bind=(self.host, self.port - DTLS_PORT_OFFSET),
            transports=["tinydtls_server"],
            server_credentials=self.psk.credentials(),
        )

    @property
    def scheme(self) -> str:
        return "coap" if self.psk is None else "coaps"

    async def stop(self) -> None:
        """Stop serving, once observers had a moment to get the last states; safe to call twice.

        A device's last notification is sent as its state changes, but its observer's
        acknowledgement (or the observer's own retransmission) needs the device's port: one
        closed right after the last change ended the observation without that state (a soak
        run stopped its devices so and lost the last reading)."""
        if self._context is not None:
            await asyncio.sleep(STOP_LINGER_S)
            await self._context.shutdown()
            self._context = None

    async def __aenter__(self) -> CoapDeviceServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def add_device(self, device: str, metrics: Iterable[str]) -> None:
        """Create the resources of ``device`` (before or after ``start``)."""
        for metric in metrics:
            if (device, metric) not in self._resources:
                resource = SensorResource(CONTENT_FORMATS[self.content_format])
                self._resources[(device, metric)] = resource
                self._site.add_resource(("sensors", device, metric), resource)

    def resource(self, device: str, metric: str) -> SensorResource:
        return self._resources[(device, metric)]

    def publish(self, device: str, metric: str, payload: bytes, content_format: int | None = None) -> None:
        """Serve raw ``payload`` (well-formed or not) for a resource and notify its observers."""
        self.add_device(device, [metric])
        self._resources[(device, metric)].update(payload, content_format)

    def publish_reading(self, reading: Reading) -> None:
        """Serve ``reading`` in the server's content format and notify."""
        self.publish(reading.device, reading.metric, coap_payload(reading, self.content_format))

    def uri(self, device: str, metric: str, host: str | None = None, scheme: str | None = None) -> str:
        authority = host or self.host
        return f"{scheme or self.scheme}://{authority}:{self.port}/sensors/{quote(device)}/{quote(metric)}"

    def resources_config(self, host: str | None = None, scheme: str | None = None) -> list[dict[str, str]]:
        """coap-ingest's ``FLUXGATE_COAP_RESOURCES`` entries for every resource served."""
        return [
            {"uri": self.uri(device, metric, host, scheme), "device_from": "path:1", "metric_from": "path:2"}
            for device, metric in self._resources
        ]

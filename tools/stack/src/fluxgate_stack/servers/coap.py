"""libcoap's example server: a real CoAP peer for the CoAP gateway's integration tests."""

from __future__ import annotations

from fluxgate_stack import probes
from fluxgate_stack.errors import InstallError
from fluxgate_stack.fetch import find_binary
from fluxgate_stack.servers.base import Port, Server

# Clients may PUT up to this many new resources (without -d the server only has its own).
DYNAMIC_RESOURCES = 1000


class CoapServer(Server):
    """libcoap coap-server (no DTLS)."""

    name = "coap-server"
    default = False  # only the CoAP integration tests need it; start it by name
    ready_timeout = 10.0
    stop_grace = 5.0
    debian_packages = {"coap-server-notls": "libcoap3-bin", "coap-client-notls": "libcoap3-bin"}

    @property
    def url(self) -> str:
        return f"coap://{self.settings.host}:{self.settings.coap_port}"

    def ports(self) -> list[Port]:
        # -p opens the same number for UDP and for CoAP over TCP.
        return [Port(self.settings.coap_port, "udp"), Port(self.settings.coap_port, "tcp")]

    def command(self) -> list[str]:
        binary = find_binary("coap-server-notls")
        if binary is None:
            raise InstallError("coap-server: coap-server-notls not found; run `fluxgate-stack install coap-server`")
        return [binary, "-A", self.settings.host, "-p", str(self.settings.coap_port), "-d", str(DYNAMIC_RESOURCES)]

    def probe(self) -> bool:
        return probes.coap_ping(self.settings.host, self.settings.coap_port)

    def env(self) -> dict[str, str]:
        return {"FLUXGATE_COAP_PEER_URL": self.url}

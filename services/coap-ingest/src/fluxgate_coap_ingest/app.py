"""``fluxgate-coap-ingest``: configure from the environment, serve health, observe until SIGTERM.

Exit codes: 0 after a clean drain, 2 for bad configuration (a coaps:// resource without
DTLS installed too), 1 when the registry or Kafka failed, or a notification could be
neither produced nor dead-lettered.
"""

from __future__ import annotations

import sys

from fluxgate_coap_ingest.service import CoapIngestService
from fluxgate_coap_ingest.settings import SERVICE, CoapIngestSettings
from fluxgate_core.lifecycle import run_service


def main() -> None:
    """Console-script entry point."""
    sys.exit(run_service(SERVICE, CoapIngestSettings, CoapIngestService, quiet_loggers=("httpx", "httpx2")))


if __name__ == "__main__":
    main()

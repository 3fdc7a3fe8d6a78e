"""Stream-Reactor CoAP source KCQL (``FLUXGATE_COAP_KCQL``) as coap-ingest's resources.

``INSERT INTO coap_sensor_topic SELECT * FROM sensors`` with ``FLUXGATE_COAP_SOURCE_URI``
``coap://localhost:5633`` observes ``coap://localhost:5633/sensors`` and writes its readings to
``coap_sensor_topic``; ``FROM a, b`` observes both. Each resource becomes one
:class:`ResourceSettings`, so what follows the settings is the code JSON resources run through.
What a statement does not say: the device id is the payload's own (``sensorId``), else the
resource path (Stream-Reactor keys its records by the resource: each one is one stream); the
metrics are the payload's; the payload format follows the Content-Format (``auto``).
"""

from __future__ import annotations

from pydantic import ValidationError

from fluxgate_coap_ingest.resource_settings import ResourceSettings
from fluxgate_core.kcql import COAP_SOURCE, DYNAMIC_TARGET, parse_sources


def resources_from_kcql(text: str, source_uri: str) -> list[ResourceSettings]:
    """One resource per FROM entry of every statement, in order; a ValueError (a KcqlError) on a fault."""
    resources = []
    for statement in parse_sources(text, COAP_SOURCE):
        if statement.dynamic:
            why = f"INSERT INTO {DYNAMIC_TARGET} derives a Kafka topic from an MQTT topic; name the CoAP source's topic"
            raise ValueError(f"KCQL statement {statement.text!r}: {why}")
        for path in statement.sources:
            uri = f"{source_uri.rstrip('/')}/{path.lstrip('/')}"
            try:
                resources.append(ResourceSettings(uri=uri, topic=statement.target, device_id=path.strip("/")))
            except ValidationError as exc:  # a URI CoAP cannot observe: say which statement, in the resource's words
                problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
                raise ValueError(f"KCQL statement {statement.text!r}, resource {uri}: {problems}") from exc
    return resources

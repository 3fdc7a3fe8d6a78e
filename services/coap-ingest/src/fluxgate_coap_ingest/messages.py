"""Output format ``coap-message``: every CoAP response whole, as Stream-Reactor's CoAP source wrote it.

Consumers built on Stream-Reactor's CoAP source read its record: message id, type, code, token,
the options, the payload. :class:`CoapMessageConverter` makes that record
(``schemas/coap_message.avsc``, field names and types as Stream-Reactor's) of a notification,
with no I/O, so the service and the contract tests run the same code. Where we differ:

* ``payload`` is the bytes as received, whatever the Content-Format (Stream-Reactor kept a
  printable payload as a string and wrote ``""`` for any other);
* an absent option is null, not Californium's placeholder (-1, or ``""`` after a bug that
  blanked every present Uri-* option); ``block1``/``block2`` stay ``""`` when absent, and
  ``max_age`` is 60 (CoAP's default) when absent, as there;
* ``token`` and ``etags`` are lower-case hex (ETags are opaque bytes: Stream-Reactor decoded them
  as text), ``size_1``/``size_2`` decimal strings (their declared type);
* the Kafka key is the resource URI (as the encoder writes keys), so one resource's messages keep their order on one
  partition (Stream-Reactor keyed by source, resource and message id, which scattered them).

:class:`MessageHandler` is the :class:`~fluxgate_coap_ingest.handler.NotificationHandler` of
this format: a message is a record whatever its payload says, so only what cannot become a
record is dead-lettered (see the README). No duplicate window either: CoAP duplicates (same
message id) never reach us, and each response is its own message with its own id and observe
number, even when its payload repeats the last one's.
"""

from __future__ import annotations

from typing import Any

import aiocoap
import structlog
from aiocoap.optiontypes import BlockOption

from fluxgate_coap_ingest.blockwise import TransferAbandoned
from fluxgate_coap_ingest.handler import letter_of
from fluxgate_coap_ingest.observer import Notification
from fluxgate_coap_ingest.resource_settings import ResourceSettings
from fluxgate_core.delivery import Delivery
from fluxgate_core.kafka import KafkaRecord
from fluxgate_core.limits import PayloadTooLarge
from fluxgate_core.serde import RecordEncoder

log = structlog.get_logger(__name__)
DEFAULT_MAX_AGE_S = 60  # RFC 7252 §5.10.5: the Max-Age of a response without the option


class CoapMessageConverter:
    """Notifications of one resource into ``CoapMessage`` records; ``max_payload_bytes`` bounds the payload."""

    def __init__(self, resource: ResourceSettings, encoder: RecordEncoder, max_payload_bytes: int) -> None:
        self.resource = resource
        self.max_payload_bytes = max_payload_bytes
        self._encoder = encoder
        self._key = encoder.encode_key(resource.uri)  # the same for every message: written once

    def convert(self, notification: Notification) -> KafkaRecord:
        """The record of ``notification``; PayloadTooLarge over the limit, SerializationError on a bug."""
        if len(notification.payload) > self.max_payload_bytes:
            raise PayloadTooLarge(f"payload of {len(notification.payload)} bytes over {self.max_payload_bytes}")
        value = self._encoder.encode(message_record(notification))
        return KafkaRecord(topic=self.resource.topic, key=self._key, value=value)


def message_record(notification: Notification) -> dict[str, Any]:
    """The ``CoapMessage`` fields of a notification (the response's own, where it has one)."""
    message = notification.message or aiocoap.Message(code=aiocoap.CONTENT)
    mtype = message.mtype.name if message.mtype is not None else None
    return {
        "ingest_time": notification.received_ms,
        "message_id": message.mid,
        "type": mtype,
        "code": message.code.dotted,
        "raw_code": int(message.code),
        "rtt": notification.rtt_ms,
        "is_last": notification.observe is None,
        "is_notification": notification.observe is not None,
        "source": _hostinfo(message, "hostinfo"),
        "destination": _hostinfo(message, "hostinfo_local"),
        "timestamp": notification.received_ms,
        "token": message.token.hex(),
        "is_duplicate": False,
        "is_confirmable": mtype == "CON",
        "is_rejected": False,
        "is_acknowledged": mtype == "CON",
        "is_canceled": False,
        "payload": notification.payload,
        **_options(message.opt, notification),
    }


def _options(opt: Any, notification: Notification) -> dict[str, Any]:
    max_age = opt.max_age
    return {
        "accept": _int(opt.accept),
        "block1": _block(opt.block1),
        "block2": _block(opt.block2),
        "content_format": notification.content_format,
        "etags": [etag.hex() for etag in opt.etags],
        "location_path": _joined(opt.location_path, "/"),
        "location_query": _joined(opt.location_query, "&"),
        "max_age": DEFAULT_MAX_AGE_S if max_age is None else int(max_age),
        "observe": notification.observe,
        "proxy_uri": opt.proxy_uri,
        "size_1": None if opt.size1 is None else str(opt.size1),
        "size_2": None if opt.size2 is None else str(opt.size2),
        "uri_host": opt.uri_host,
        "uri_port": opt.uri_port,
        "uri_path": _joined(opt.uri_path, "/"),
        "uri_query": _joined(opt.uri_query, "&"),
    }


def _block(block: BlockOption.BlockwiseTuple | None) -> str:
    """Californium's ``BlockOption.toString()``, which Stream-Reactor wrote: ``(szx=6/1024, m=true, num=0)``."""
    if block is None:
        return ""
    more = "true" if block.more else "false"
    return f"(szx={block.size_exponent}/{block.size}, m={more}, num={block.block_number})"


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _joined(parts: tuple[str, ...], separator: str) -> str | None:
    return separator.join(parts) if parts else None


def _hostinfo(message: aiocoap.Message, side: str) -> str | None:
    """``host:port`` of the message's remote (or of our side of it); None when the transport cannot say."""
    try:
        return str(getattr(message.remote, side))
    except Exception:  # no remote (a message built here), or a transport without that side's address
        return None


class MessageHandler:
    """What one resource's notifications become with ``output_format`` coap-message: one record each."""

    def __init__(self, converter: CoapMessageConverter) -> None:
        self._converter = converter
        self._device = converter.resource.routed_device()

    def delivery(self, notification: Notification) -> Delivery:
        """The record of ``notification``, or why it has none (then its payload is dead-lettered)."""
        letter = letter_of(notification, self._device)
        if notification.abandoned:
            return Delivery(letter, rejected=TransferAbandoned.after(len(notification.payload)))
        try:
            return Delivery(letter, [self._converter.convert(notification)])
        except Exception as exc:  # over the limit, or a bug: the message is kept, as a dead letter
            log.warning("notification.rejected", uri=notification.uri, error=str(exc), observe=notification.observe)
            return Delivery(letter, rejected=exc)

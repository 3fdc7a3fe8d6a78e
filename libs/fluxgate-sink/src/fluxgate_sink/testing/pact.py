"""The consumer side of a persister's pact with the aggregator on ``temperatures.aggregated``.

A persister's contract test describes itself as a :class:`PersisterPact` (its consumer name
and the fields its ``consumed.py`` declares) and keeps only what is its own: the consumer
half, a function taking the record as the sink runtime hands it over (decoded, timestamps
as aware datetimes) and showing the persister can use it. This module builds the Pact V4
asynchronous-message pact from the declaration, with matchers rather than literal values,
and keeps the committed copy in ``contracts-tests/pacts/`` honest. The aggregator verifies
those copies against what its real Spark job writes
(``services/aggregator/tests/contract/test_persister_pacts.py``).

Regenerate the committed pacts after changing a declaration with ``FLUXGATE_UPDATE_PACTS=1``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import fastavro
from pact import Pact, match

from fluxgate_core.kafka import ConsumedRecord
from fluxgate_sink.contract import ConsumedFields, is_nullable, kind
from fluxgate_sink.kcql import parse
from fluxgate_sink.routing import Router
from fluxgate_sink.sink import SinkItem

PROVIDER = "aggregator"
TOPIC = "temperatures.aggregated"
MESSAGE = f"a temperature aggregate on {TOPIC}"
UPDATE_VARIABLE = "FLUXGATE_UPDATE_PACTS"

EXAMPLE: dict[str, Any] = {
    "device_id": "Sensor4",
    "metric": "temperature",
    "window_start": 1486997160000,
    "window_end": 1486997220000,
    "count": 12,
    "min": 21.5,
    "max": 23.6,
    "mean": 22.4,
    "stddev": 0.61,
    "first_event_time": 1486997161029,
    "last_event_time": 1486997219029,
    "unit": "Cel",
}
"""The pact's example message: ``Sensor4``'s window starting 2017-02-13 14:46 UTC."""

# Avro resolution promotes int/long/float writers to double: any JSON number will do for a
# double; timestamps and counts must stay whole numbers.
MATCHERS: dict[str, Callable[[Any], Any]] = {
    "string": match.type,
    "double": match.number,
    "long": match.int,
    "timestamp-millis": match.int,
}
NULL_OR_SAME_TYPE = {"combine": "OR", "matchers": [{"match": "type"}, {"match": "null"}]}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

ConsumerHalf = Callable[[dict[str, Any]], None]
"""Takes the decoded record a sink sees; fails (assertion) when the persister cannot use it."""


def pacts_dir() -> Path:
    """``contracts-tests/pacts`` of the source checkout this module runs from."""
    for parent in Path(__file__).resolve().parents:
        if (candidate := parent / "contracts-tests" / "pacts").is_dir():
            return candidate
    raise FileNotFoundError("no contracts-tests/pacts above this checkout")


@dataclass(frozen=True)
class PersisterPact:
    """One persister's pact: ``<consumer>-aggregator.json``, written from ``fields``."""

    consumer: str  # e.g. "es-persister"
    fields: ConsumedFields  # the persister's ``consumed.CONSUMED_FIELDS``
    purpose: str  # the pact's first comment: what the persister does with the fields
    declared_in: str  # the module holding the declaration, named in comments and messages

    @property
    def file_name(self) -> str:
        return f"{self.consumer}-{PROVIDER}.json"

    def build(self) -> Pact:
        """The persister's expectations of the aggregator's records, from its declaration."""
        pact = Pact(self.consumer, PROVIDER).with_specification("V4")
        body = {
            name: EXAMPLE[name] if is_nullable(avro) else MATCHERS[kind(avro)](EXAMPLE[name])
            for name, avro in self.fields.items()
        }
        nullable = {f"$.{name}": NULL_OR_SAME_TYPE for name, avro in self.fields.items() if is_nullable(avro)}
        (
            pact.upon_receiving(MESSAGE, "Async")
            .with_body(body, "application/json")
            .with_matching_rules({"body": nullable})
            .add_text_comment(self.purpose)
            .add_text_comment(f"See {self.declared_in}. Contents: the decoded record, timestamps as epoch ms.")
        )
        return pact

    def decoded(self, body: str | bytes | None) -> dict[str, Any]:
        """A pact message as the record the runner hands a sink: timestamps as aware datetimes,
        checked with fastavro against the declared fields."""
        assert body is not None, "the message has no contents"
        message: dict[str, Any] = json.loads(body)
        record = {name: _as_datetime(value) if self._is_timestamp(name) else value for name, value in message.items()}
        view = {
            "type": "record",
            "name": "Consumed",
            "fields": [{"name": n, "type": t} for n, t in self.fields.items()],
        }
        fastavro.validation.validate(record, fastavro.parse_schema(view), raise_errors=True)
        return record

    def verify(self, consumer_half: ConsumerHalf) -> None:
        """Hand the pact's example message, decoded, to ``consumer_half``."""

        def handler(body: str | bytes | None, metadata: dict[str, object]) -> None:
            consumer_half(self.decoded(body))

        self.build().verify(handler, "Async")

    def check_committed(self, scratch: Path) -> None:
        """Fail unless the committed pact is the one the declaration makes (the pact-rust
        version stamp aside); with ``FLUXGATE_UPDATE_PACTS=1``, rewrite it first."""
        committed = pacts_dir() / self.file_name
        if os.environ.get(UPDATE_VARIABLE) == "1":
            self.build().write_file(committed.parent, overwrite=True)
        self.build().write_file(scratch, overwrite=True)
        assert committed.is_file() and _comparable(committed) == _comparable(scratch / self.file_name), (
            f"contracts-tests/pacts/{self.file_name} no longer matches what {self.declared_in} declares; "
            f"regenerate with {UPDATE_VARIABLE}=1 and commit it"
        )

    def _is_timestamp(self, name: str) -> bool:
        return name in self.fields and kind(self.fields[name]) == "timestamp-millis"


def routed(kcql: str, record: dict[str, Any]) -> list[SinkItem]:
    """The items the runtime's router makes of ``record`` under ``kcql`` (one per statement);
    fails when a statement cannot route it (a PK or event-time field missing ...)."""
    source = ConsumedRecord(TOPIC, 0, 0, str(record.get("device_id", "")).encode(), b"", (), 0, record)
    result = Router(parse(kcql)).route([source])
    assert not result.unroutable, f"unroutable: {[str(u.error) for u in result.unroutable]}"
    return result.items


def _as_datetime(epoch_ms: Any) -> Any:
    return _EPOCH + timedelta(milliseconds=epoch_ms) if isinstance(epoch_ms, int) else epoch_ms


def _comparable(pact_file: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(pact_file.read_text(encoding="utf-8"))
    document["metadata"].pop("pactRust", None)
    return document

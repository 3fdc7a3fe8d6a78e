"""What a device's state is and when it changes: pure functions, no Kafka, no clock.

A device's state is a JSON-able dict (the table's value, so its changelog is plain JSON).
Times are epoch milliseconds. "Heard" is the later of the gateway's ingest time of the
device's latest reading and the wall time this service processed it: a device whose
readings wait in a backlog we are working through is not silent.

Silence is judged only once this instance has caught up with its input: after taking
over a partition (a start, a restart, a rebalance) and restoring its table, the input's
end offset is noted at the next timer tick, and the partition is watched from the first
tick at which every record up to it has been read. Until then a device's next reading
may simply not have been replayed yet, so no device turns OFFLINE; from then on silence
counts from no earlier than that tick. A device that really fell silent across a restart
turns OFFLINE later than it would have (by the restart and the catch-up): transitions are
late, never invented. If the last records before that end were read before the restart
but are not in the table (undecodable ones), the partition is watched from its next record
instead: no timeout stands in for the catch-up, as a slow replay would then look like silence.

Once watched, a partition's silences are judged as of the tick's time only when every record
sent by then has been processed; while records wait (a stalled consumer), as of the send time
of the newest one processed (``tracker.py``): the same rule, late, never invented.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

Status = Literal["ONLINE", "OFFLINE"]
State = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Reading:
    """The fields of a ``SensorReading`` this service keeps, with where it was read from."""

    device_id: str
    metric: str
    value: float
    unit: str | None
    event_time_ms: int
    ingest_time_ms: int
    protocol: str
    source: str
    partition: int
    offset: int

    @classmethod
    def from_record(cls, record: dict[str, Any], partition: int, offset: int) -> Reading:
        """From a decoded ``SensorReading`` (fastavro gives timestamp-millis as datetimes)."""
        return cls(
            device_id=str(record["device_id"]),
            metric=str(record["metric"]),
            value=float(record["value"]),
            unit=record.get("unit"),
            event_time_ms=to_ms(record["event_time"]),
            ingest_time_ms=to_ms(record["ingest_time"]),
            protocol=str(record["source_protocol"]),
            source=str(record["source"]),
            partition=partition,
            offset=offset,
        )


@dataclass(frozen=True, slots=True)
class CatchUp:
    """How far an input partition must be read (``end``: its end offset noted after this
    instance restored it) and how far it has been (``read``: the highest offset read, or
    counted in the restored table)."""

    end: int
    read: int


def caught_up(progress: CatchUp) -> bool:
    """Whether a partition's silences may be judged (see the module's docstring)."""
    return progress.read >= progress.end - 1


def to_ms(value: datetime | int) -> int:
    return int(value.timestamp() * 1000) if isinstance(value, datetime) else int(value)


def is_replay(state: State | None, reading: Reading) -> bool:
    """A reading the state already counted: replayed after a crash between the table's
    changelog write and the offset commit. One device's readings share one partition."""
    return state is not None and state["partition"] == reading.partition and reading.offset <= state["offset"]


def apply_reading(state: State | None, reading: Reading, now_ms: int) -> tuple[State, Status | None]:
    """The state after ``reading``, and the status it turned the device into (None: unchanged)."""
    metrics = dict(state["metrics"]) if state else {}
    metrics[reading.metric] = {"value": reading.value, "unit": reading.unit, "event_time_ms": reading.event_time_ms}
    new: State = {
        "device_id": reading.device_id,
        "status": "ONLINE",
        "status_since_ms": now_ms,
        "first_seen_ms": state["first_seen_ms"] if state else reading.ingest_time_ms,
        "last_event_time_ms": max(reading.event_time_ms, state["last_event_time_ms"] if state else 0),
        "last_ingest_time_ms": max(reading.ingest_time_ms, state["last_ingest_time_ms"] if state else 0),
        "last_processed_ms": now_ms,
        "protocol": reading.protocol,
        "source": reading.source,
        "metrics": metrics,
        "readings": (state["readings"] if state else 0) + 1,
        "partition": reading.partition,
        "offset": reading.offset,
    }
    if state is not None and state["status"] == "ONLINE":
        new["status_since_ms"] = state["status_since_ms"]
        return new, None
    return new, "ONLINE"


def heard_ms(state: State) -> int:
    """When the device was last heard of, by the gateway or by this service."""
    return max(int(state["last_ingest_time_ms"]), int(state["last_processed_ms"]))


def is_silent(state: State, now_ms: int, threshold_ms: int, watch_start_ms: int) -> bool:
    """True when an ONLINE device has been silent for the threshold, counted from no
    earlier than ``watch_start_ms`` (see the module's docstring)."""
    if state["status"] != "ONLINE":
        return False
    return now_ms - max(heard_ms(state), watch_start_ms) >= threshold_ms


def mark_offline(state: State, now_ms: int) -> State:
    return {**state, "status": "OFFLINE", "status_since_ms": now_ms}


def transition_record(state: State, previous: Status | None, threshold_ms: int) -> dict[str, Any]:
    """The ``DeviceStatus`` record of the transition that produced ``state``."""
    return {
        "device_id": state["device_id"],
        "status": state["status"],
        "previous_status": previous,
        "changed_at": state["status_since_ms"],
        "last_event_time": state["last_event_time_ms"],
        "last_ingest_time": state["last_ingest_time_ms"],
        "silence_threshold_ms": threshold_ms,
        "source_protocol": state["protocol"],
        "source": state["source"],
        "readings": state["readings"],
    }


_STATE_FIELDS: dict[str, type] = {
    "device_id": str,
    "status": str,
    "status_since_ms": int,
    "first_seen_ms": int,
    "last_event_time_ms": int,
    "last_ingest_time_ms": int,
    "last_processed_ms": int,
    "protocol": str,
    "source": str,
    "metrics": dict,
    "readings": int,
    "partition": int,
    "offset": int,
}


def unreadable_because(value: Any) -> str | None:
    """Why a table entry restored from the changelog is not a device state this version can
    use (None: it is one). Such an entry is left out; the device's next reading replaces it."""
    if not isinstance(value, dict):
        return f"not an object: {type(value).__name__}"
    for name, kind in _STATE_FIELDS.items():
        if name not in value:
            return f"no {name!r}"
        if not isinstance(value[name], kind) or isinstance(value[name], bool):
            return f"{name!r} is {type(value[name]).__name__}, not {kind.__name__}"
    if value["status"] not in ("ONLINE", "OFFLINE"):
        return f"'status' is {value['status']!r}"
    return None


def view(state: State) -> dict[str, Any]:
    """What ``GET /devices`` shows of a state (the partition, not the offset bookkeeping)."""
    return {key: value for key, value in state.items() if key != "offset"}

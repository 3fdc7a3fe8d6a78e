"""The soak run's check: what the devices sent, against what every topic and store holds.

It trusts no code of the pipeline's: the simulator's ledger says what was sent; its own
Kafka consumer and Avro decoding (writer schema by id from the registry, then fastavro)
read the topics; its own windowing recomputes every aggregate; each store is read with its
own client (Elasticsearch, cassandra-driver, Hazelcast), not the persisters' code.

What it holds the pipeline to:
- every reading a device sent reaches the readings topic (duplicates may be repeated
  there: at least once), except CoAP readings sent while a fault cut CoAP off (observe
  sends a resource's state, not its history: those may be missing, and are counted);
  nothing else reaches it;
- every store holds every window once, equal (count, min, max, mean, stddev) to the window
  recomputed from what was sent: each reading once, those judged late out (the late topic
  is the aggregator's verdict: a redelivered copy of a counted reading must not be on it,
  which the aggregator keeps for copies its dedup horizon, 2 minutes, behind; a fault here
  lasts less than that); the ringbuffer (append-only) may repeat a window, and its repeats are counted, each equal;
- every malformed payload is in the dead-letter topic with a reason, and nothing else is;
  the persisters' dead-letter topic is empty;
- every reading stamped late once the pipeline was whole is on the late topic, and no
  reading is on it for two arrivals; one arrival written again by a batch run again after a
  crash (output at least once, as the windows) is counted apart.
"""

from __future__ import annotations

import bisect
import io
import json
import math
import struct
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import fastavro
import httpx
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from fluxgate_stack import Endpoints

Identity = tuple[str, str, int, float, int | None]
Window = tuple[str, int]
STATS = ("count", "min", "max", "mean", "stddev")
# Faults that may keep a reading from ever reaching the pipeline, by protocol. CoAP observe
# sends a resource's state, not its history, so a lapsed observation misses states. An MQTT
# device publishing while its broker is killed gets no PUBACK: the simulated devices (gmqtt,
# a clean session) drop those, as devices without an outbox do; the pipeline's promise begins
# at the broker's acknowledgement. A stopped broker keeps its sockets: nothing is cut off.
CUT_OFF = {"coap": {("coap-ingest", "kill"), ("coap-ingest", "stop"), ("kafka", "kill"), ("kafka", "stop"),
                    ("registry", "kill"), ("registry", "stop")},
           "mqtt": {("mosquitto", "kill")}}  # fmt: skip
# A killed CoAP gateway also takes along the readings it held and Kafka had not confirmed (in
# its socket buffer, a batch, the producer's queue): nothing sends them again. The simulated
# devices (aiocoap) notify as CON, since the observer registered with a CON GET, but aiocoap
# acknowledges a notification on receipt, before the gateway sees it, and a device never
# repeats an acknowledged one (a NON one is not acknowledged at all). The restarted observer is
# sent the resource's current state, not what it missed. So a resource's readings sent shortly
# before the kill, after its last one that arrived, may be missing; one missing before another
# of the same resource that arrived is a loss (the gateway keeps a resource's order).
IN_FLIGHT = {("coap-ingest", "kill")}
# The aggregator's default horizon: max(window 1 min, watermark 30 s, dedup horizon 2 min).
HORIZON_MS = 120_000
CLOCK_MARGIN_MS = 30_000  # the clock a batch starts from may lead a copy's own ingest time
IN_FLIGHT_MS = 5_000  # far more than a reading spends in the gateway (25 ms linger, Kafka's ack)


@dataclass
class Decoder:
    """Confluent wire format (magic byte, schema id, Avro body) with the writer schema by id."""

    registry_url: str
    schemas: dict[int, Any] = field(default_factory=dict)

    def __call__(self, data: bytes | None) -> dict[str, Any] | None:
        if data is None or len(data) < 5 or data[0] != 0:
            return None
        schema_id = struct.unpack(">I", data[1:5])[0]
        if schema_id not in self.schemas:
            reply = httpx.get(f"{self.registry_url}/schemas/ids/{schema_id}", timeout=10)
            reply.raise_for_status()
            self.schemas[schema_id] = fastavro.parse_schema(json.loads(reply.json()["schema"]))
        try:
            record = fastavro.schemaless_reader(io.BytesIO(data[5:]), self.schemas[schema_id])
        except (EOFError, ValueError, TypeError, IndexError):
            return None
        return record if isinstance(record, dict) else None


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fluxgate-check"})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in metadata.partitions}
    finally:
        consumer.close()


def records(bootstrap: str, topic: str, start: dict[int, int] | None = None) -> Iterator[Message]:
    """Every record of ``topic`` from ``start`` (default: the beginning) to its end now."""
    ends = end_offsets(bootstrap, topic)
    begin = start or {}
    left = {p: end for p, end in ends.items() if end > begin.get(p, 0)}
    # A partition is done at its end offset, or at its end-of-partition event: a transaction's
    # commit marker is the last offset of a transactional topic and is never handed out.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fluxgate-check", "enable.auto.commit": False,
                         "enable.partition.eof": True})  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, p, begin.get(p, 0)) for p in left])
        while left:
            # consume() waits out its whole timeout unless the batch fills: a short one, so that
            # a topic's last few records are not followed by seconds of waiting.
            for message in consumer.consume(1000, timeout=0.1):
                partition, offset, error = message.partition(), message.offset(), message.error()
                if partition is None or partition not in left:
                    continue
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        left.pop(partition)
                    continue
                if offset is None or offset >= ends[partition]:
                    continue
                if offset + 1 >= ends[partition]:
                    left.pop(partition)
                yield message
    finally:
        consumer.close()


def to_ms(value: Any) -> int:
    """Epoch milliseconds from what a store or Avro gives back: a datetime (naive is UTC),
    an ISO 8601 text or a number."""
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=UTC)
        return round(aware.timestamp() * 1000)
    if isinstance(value, str):
        return to_ms(datetime.fromisoformat(value.replace("Z", "+00:00")))
    return int(value)


def identity(reading: dict[str, Any]) -> Identity:
    event = to_ms(reading["event_time"])
    return (reading["device_id"], reading["metric"], event, float(reading["value"]), reading.get("sequence"))


def stats(values: list[float]) -> dict[str, float]:
    mean = sum(values) / len(values)
    stddev = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return {"count": len(values), "min": min(values), "max": max(values), "mean": mean, "stddev": stddev}


def differs(found: dict[str, Any], wanted: dict[str, float]) -> list[str]:
    wrong = []
    for name in STATS:
        have = found.get(name)
        if have is None or not math.isclose(float(have), wanted[name], rel_tol=1e-9, abs_tol=1e-9):
            wrong.append(f"{name} {have} != {wanted[name]}")
    return wrong


@dataclass(frozen=True)
class FaultWindow:
    """A fault, in wall-clock milliseconds: from its start to its end, and until whole again."""

    target: str
    kind: str
    start_ms: int
    end_ms: int
    whole_ms: int


@dataclass(frozen=True)
class Check:
    ledger: Path
    endpoints: Endpoints
    prefix: str
    es_alias: str
    store_target: str
    faults: list[FaultWindow]
    window_ms: int
    excluded: str  # the watermark push's device
    metric: str = "temperature"
    watermark_ms: int | None = None  # the aggregator's delay; None: every reading stamped late must be judged late
    whole_from_ms: int = 0  # late readings are judged from here (the pipeline whole for the first time)


@dataclass
class Result:
    problems: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.problems


@dataclass
class Sent:
    """The ledger, read once: good readings by identity, broken payloads, late ones."""

    good: dict[Identity, dict[str, Any]] = field(default_factory=dict)
    broken: Counter[bytes] = field(default_factory=Counter)
    broken_entries: dict[bytes, dict[str, Any]] = field(default_factory=dict)
    emissions: Counter[str] = field(default_factory=Counter)

    @classmethod
    def read(cls, path: Path, excluded: str) -> Sent:
        sent = cls()
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                entry = json.loads(line)
                if entry["d"] == excluded:
                    continue
                sent.emissions[entry["k"]] += 1
                if "bad" in entry:
                    payload = bytes.fromhex(entry["bad"])
                    sent.broken[payload] += 1
                    sent.broken_entries[payload] = entry
                else:
                    key = (entry["d"], entry["m"], entry["t"], float(entry["v"]), entry["s"])
                    sent.good.setdefault(key, entry)
        return sent


@dataclass
class CutOff:
    """CoAP readings a fault may have kept from the pipeline: observe sends a resource's
    state, not its history, so what a resource sent from a fault's start until the first of
    its readings to arrive that was sent after the fault ended may never have reached anyone
    (a stopped observer's registration lapses; what the socket buffered still arrives). The
    run's start counts as such a fault: a device may send before it is observed. A killed
    gateway also loses what it held (``IN_FLIGHT``): a resource's readings sent up to
    ``IN_FLIGHT_MS`` before the kill, after the last of them that arrived."""

    faults: list[FaultWindow]
    resumed: dict[tuple[FaultWindow, str, str], int] = field(default_factory=dict)
    delivered_before: dict[tuple[FaultWindow, str, str], int] = field(default_factory=dict)

    @classmethod
    def of(cls, faults: list[FaultWindow], sent: Sent, arrived: Counter[Identity]) -> CutOff:
        windows = [FaultWindow("start", "start", 0, 0, 0)] + [f for f in faults if cuts_off(f)]
        cut = cls(windows)
        for key, entry in sent.good.items():
            if key not in arrived:
                continue
            for fault in cut.of_protocol(entry["p"]):
                resource = (fault, entry["d"], entry["m"])
                if entry["w"] >= fault.end_ms and entry["w"] < cut.resumed.get(resource, 2**62):
                    cut.resumed[resource] = entry["w"]
                if fault.start_ms > entry["w"] > cut.delivered_before.get(resource, -1):
                    cut.delivered_before[resource] = entry["w"]
        return cut

    def excused(self, entry: dict[str, Any]) -> FaultWindow | None:
        """The fault that kept ``entry`` away: sent from its start until the first reading of
        the same device and metric sent after its end arrived, or in flight when it struck."""
        for fault in self.of_protocol(entry["p"]):
            resource = (fault, entry["d"], entry["m"])
            # <=: a reading sent in the same millisecond as the first that arrived after the fault
            # is not after it: observe may deliver only the later state of the two (a CI soak run
            # lost seq 4 sent with an out-of-order seq 1 in one millisecond, right at the start).
            if fault.start_ms <= entry["w"] <= self.resumed.get(resource, 2**62):
                return fault
            if (fault.target, fault.kind) in IN_FLIGHT and self._in_flight(fault, entry["w"], resource):
                return fault
        return None

    def _in_flight(self, fault: FaultWindow, sent_ms: int, resource: tuple[FaultWindow, str, str]) -> bool:
        shortly_before = fault.start_ms - IN_FLIGHT_MS <= sent_ms < fault.start_ms
        return shortly_before and sent_ms > self.delivered_before.get(resource, -1)

    def of_protocol(self, protocol: str) -> list[FaultWindow]:
        """The faults that may cut ``protocol``'s readings off; a CoAP device may also send
        before it is first observed (the run's start)."""
        cutting = CUT_OFF[protocol] | ({("start", "start")} if protocol == "coap" else set())
        return [f for f in self.faults if (f.target, f.kind) in cutting]

    def longest_gap_ms(self) -> dict[str, int]:
        """Per fault: how long after its end the slowest resource's readings resumed."""
        gaps: dict[str, int] = {}
        for (fault, _, _), resumed in self.resumed.items():
            if fault.kind == "start":
                continue
            name = f"{fault.kind} {fault.target} at {fault.start_ms}"
            gaps[name] = max(gaps.get(name, 0), resumed - fault.end_ms)
        return gaps


def cuts_off(fault: FaultWindow) -> bool:
    return any((fault.target, fault.kind) in faults for faults in CUT_OFF.values())


def save(spec: Check, path: Path) -> None:
    """What the check needs, so ``python tools/soak_check.py <run folder>`` can run it again."""
    document = {**asdict(spec), "ledger": str(spec.ledger), "endpoints": asdict(spec.endpoints)}
    path.write_text(json.dumps(document, indent=2) + "\n")


def load(path: Path) -> Check:
    document = json.loads(path.read_text())
    faults = [FaultWindow(**fault) for fault in document.pop("faults")]
    endpoints = Endpoints(**document.pop("endpoints"))
    return Check(**{**document, "ledger": Path(document["ledger"]), "endpoints": endpoints, "faults": faults})


def check(spec: Check) -> Result:
    result = Result()
    sent = Sent.read(spec.ledger, spec.excluded)
    decode = Decoder(spec.endpoints.registry_url)
    bootstrap, topic = spec.endpoints.bootstrap, (lambda name: spec.prefix + name)
    arrived: Counter[Identity] = Counter()
    ingested: dict[Identity, int] = {}  # the first arrival's ingest time (the gateways' clock)
    for message in records(bootstrap, topic("sensors.readings")):
        reading = decode(message.value())
        if reading is None:
            result.problems.append(f"undecodable reading at {message.partition()}:{message.offset()}")
        elif reading["device_id"] != spec.excluded:
            arrived[key := identity(reading)] += 1
            ingested.setdefault(key, to_ms(reading["ingest_time"]))
    on_late = [r for m in records(bootstrap, topic("temperatures.late")) if (r := decode(m.value())) is not None]
    late, first_late, copy_after = late_arrivals(on_late, ingested, result)
    # A later copy (a broker's redelivery) judged late when its first arrival was counted. The
    # aggregator keeps a counted reading for its horizon on the gateways' clock too, so a copy
    # that came within it (less a margin: the job judges by the clock at the batch's start)
    # must not be there; one that came later may.
    copies = sorted(set(late) - set(first_late))
    result.figures["late_copies_of_counted_readings"] = {"count": len(copies), "e.g.": copies[:3]}
    early = sorted(key for key in copies if copy_after.get(key, HORIZON_MS) < HORIZON_MS - CLOCK_MARGIN_MS)
    if early:
        result.problems.append(f"{len(early)} copies of counted readings written late within the horizon: {early[:3]}")
    cut = CutOff.of(spec.faults, sent, arrived)
    topic_windows = AggregatesOnTopic.read(spec, decode)
    readings(spec, sent, arrived, late, cut, result, topic_windows.behind(spec, ingested))
    windows = expected_windows(spec, sent, arrived, first_late, cut)
    compare("topic", topic_windows.written, windows, result)
    positions = topic_windows.positions
    ring: dict[str, int] = {}
    for store, found in read_stores(spec, ring).items():
        wanted = without_lost_with_member(store, found, windows, spec.faults, result)
        if store == "hazelcast":
            wanted = without_overwritten(found, wanted, positions, ring.get("head", 0), result)
        compare(store, found, wanted, result)
    dead_letters(spec, sent, decode, cut, result)
    return result


def late_arrivals(
    on_late: list[dict[str, Any]], ingested: dict[Identity, int], result: Result
) -> tuple[Counter[Identity], Counter[Identity], dict[Identity, int]]:
    """The late topic's readings as the arrivals they were written for: per reading, how many of
    its arrivals (ingest times) were written late, which were its first arrival, and how long
    after its first arrival a later one came.

    The job's output is at least once: a batch run again after a crash (its output written,
    Spark's commit not) writes the same arrival again, the same record with the same ingest
    time. That is counted apart (``late_rewritten_by_a_batch_run_again``), as the topic's
    repeated windows are; a second arrival of a reading written late is the job's mistake."""
    times: defaultdict[Identity, Counter[int]] = defaultdict(Counter)
    for reading in on_late:
        times[identity(reading)][to_ms(reading["ingest_time"])] += 1
    late: Counter[Identity] = Counter({key: len(arrivals) for key, arrivals in times.items()})
    first_late: Counter[Identity] = Counter()  # the first arrival judged late: never counted
    copy_after: dict[Identity, int] = {}  # a late copy: how long after the first arrival it came
    for key, arrivals in times.items():
        for at in arrivals:
            if at == ingested.get(key):
                first_late[key] += 1
            elif key in ingested:
                copy_after[key] = at - ingested[key]
    again = sorted(key for key, arrivals in times.items() if max(arrivals.values()) > 1)
    result.figures["late_rewritten_by_a_batch_run_again"] = {"count": len(again), "e.g.": again[:3]}
    return late, first_late, copy_after


def readings(
    spec: Check, sent: Sent, arrived: Counter[Identity], late: Counter[Identity], cut: CutOff, result: Result,
    behind: Callable[[Identity], bool] | None = None,
) -> None:  # fmt: skip
    """``behind``: whether a reading stamped late was surely behind its device's watermark
    when it arrived (default: every one); only those must be on the late topic."""
    missing: Counter[str] = Counter()
    cut_off: Counter[str] = Counter()
    for key, entry in sent.good.items():
        if key in arrived:
            continue
        fault = cut.excused(entry)
        if fault is not None:
            when = "in flight at" if entry["w"] < fault.start_ms else "during"
            cut_off[f"{entry['p']} {when} {fault.kind} {fault.target}"] += 1
        else:
            missing[entry["p"]] += 1
            if sum(missing.values()) <= 5:
                result.problems.append(f"lost: {entry['p']} reading {key} sent at {entry['w']}")
    if missing:
        result.problems.append(f"lost readings by protocol: {dict(missing)}")
    invented = [key for key in arrived if key not in sent.good]
    if invented:
        result.problems.append(f"{len(invented)} readings on the topic nobody sent, e.g. {invented[:3]}")
    twice_late = [key for key, n in late.items() if n > 1]
    if twice_late:
        result.problems.append(f"{len(twice_late)} readings on the late topic more than once, e.g. {twice_late[:3]}")
    # Only the aggregated metric's late readings are written to the late topic.
    checked = [(k, e) for k, e in sent.good.items() if k[1] == spec.metric and e["w"] >= spec.whole_from_ms]
    stamped_late = [key for key, entry in checked if entry["k"] == "late" and key in arrived
                    and (behind is None or behind(key))]  # fmt: skip
    not_late = [key for key in stamped_late if key not in late]
    if not_late:
        result.problems.append(f"{len(not_late)} late readings not on the late topic, e.g. {not_late[:3]}")
    result.figures |= {
        "emissions": dict(sent.emissions),
        "readings_sent": len(sent.good),
        "readings_arrived": len(arrived),
        "readings_repeated_on_topic": sum(n - 1 for n in arrived.values()),
        "readings_cut_off": dict(cut_off),
        "coap_resumed_after_ms": cut.longest_gap_ms(),
        "late_on_topic": len(late),
        "stamped_late_checked": len(stamped_late),
        "judged_late_though_sent_on_time": sum(1 for k in late if k in sent.good and sent.good[k]["k"] != "late"),
    }


def expected_windows(
    spec: Check, sent: Sent, arrived: Counter[Identity], late: Counter[Identity], cut: CutOff
) -> dict[Window, dict[str, float]]:
    """Each window recomputed from what was sent: a reading once, the late ones out, a CoAP
    reading missed while cut off out (it never reached the pipeline)."""
    values: dict[Window, list[float]] = defaultdict(list)
    for key, entry in sent.good.items():
        if key[1] != spec.metric or key in late or (key not in arrived and cut.excused(entry)):
            continue
        values[(key[0], key[2] // spec.window_ms * spec.window_ms)].append(key[3])
    return {window: stats(v) for window, v in values.items()}


@dataclass
class AggregatesOnTopic:
    """The aggregates topic, read once: each window's copies, where they are (partition,
    offsets) and, per device, when each of its windows was written (the record's timestamp)."""

    written: dict[Window, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    positions: dict[Window, tuple[int, list[int]]] = field(default_factory=dict)
    emitted: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))

    @classmethod
    def read(cls, spec: Check, decode: Decoder) -> AggregatesOnTopic:
        topic = cls()
        for message in records(spec.endpoints.bootstrap, spec.prefix + "temperatures.aggregated"):
            aggregate = decode(message.value())
            if aggregate is not None and aggregate["device_id"] != spec.excluded:
                window = (aggregate["device_id"], to_ms(aggregate["window_start"]))
                topic.written[window].append(aggregate)
                topic.positions.setdefault(window, (message.partition() or 0, []))[1].append(message.offset() or 0)
                topic.emitted[window[0]].append((message.timestamp()[1], window[1]))
        return topic

    def behind(self, spec: Check, ingested: dict[Identity, int]) -> Callable[[Identity], bool] | None:
        """Whether a reading was surely late when the job read it (decision 0011). A device's
        watermark is at least its newest event time minus the delay, as of the batches before;
        a window of the device on the topic before the reading was ingested was written by
        such a batch, and holds a reading at or after its start. So a reading at or before a
        start, minus the delay, of the device's windows written before its ingest was behind.
        A reading stamped in the past is not surely late otherwise: a device's first reading
        sets its clock (one stamped two minutes back is a clock two minutes behind), and a job
        stalled longer than the reading was stamped back has not moved its watermark past it."""
        if spec.watermark_ms is None:
            return None
        newest: dict[str, tuple[list[int], list[int]]] = {}  # device -> write times, newest start by then
        for device, windows in self.emitted.items():
            times, starts, most = [], [], -(2**62)
            for written_ms, start in sorted(windows):
                most = max(most, start)
                times.append(written_ms)
                starts.append(most)
            newest[device] = (times, starts)
        delay = spec.watermark_ms

        def behind(key: Identity) -> bool:
            times, starts = newest.get(key[0], ([], []))
            before = bisect.bisect_left(times, ingested.get(key, -(2**62)))  # written strictly before
            return before > 0 and key[2] <= starts[before - 1] - delay

        return behind


def without_lost_with_member(
    store: str, found: dict[Window, Any], windows: dict[Window, dict[str, float]], faults: list[FaultWindow],
    result: Result,
) -> dict[Window, dict[str, float]]:  # fmt: skip
    """The windows a store should hold. A Hazelcast member keeps its data in memory: one
    killed alone (no second member holding backups) comes back empty, so what was written
    before its restart is gone with it. Those windows are counted apart, not excused silently."""
    kills = [f.end_ms for f in faults if (f.target, f.kind) == ("hazelcast", "kill")]
    if store != "hazelcast" or not kills:
        return windows
    lost = {w for w in windows if w not in found and w[1] < max(kills)}
    result.figures["hazelcast_windows_lost_with_killed_member"] = len(lost)
    return {w: stats for w, stats in windows.items() if w not in lost}


def without_overwritten(
    found: dict[Window, Any], windows: dict[Window, dict[str, float]],
    positions: dict[Window, tuple[int, list[int]]], head: int, result: Result,
) -> dict[Window, dict[str, float]]:  # fmt: skip
    """The windows the ringbuffer should still hold. It keeps its capacity's newest items and
    overwrites the oldest (``head`` of them so far): a fleet's soak writes more windows than
    that. The persister appends a partition's aggregates in their order on the topic, so a
    window is overwritten, not lost, when every copy of it on the topic comes before the
    first copy of any window the ringbuffer still holds from the same partition. Those are
    counted apart; they cannot be more than the items overwritten."""
    if head <= 0:
        return windows
    first_held: dict[int, int] = {}
    for window in found:
        if window in positions:
            partition, offsets = positions[window]
            first_held[partition] = min(first_held.get(partition, 2**62), min(offsets))
    overwritten = {w for w in windows if w not in found and w in positions
                   and max(positions[w][1]) < first_held.get(positions[w][0], 2**62)}  # fmt: skip
    result.figures["hazelcast_windows_overwritten_at_capacity"] = {"windows": len(overwritten), "items": head}
    if len(overwritten) > head:
        result.problems.append(f"hazelcast: {len(overwritten)} windows overwritten, more than its {head} items")
    return {w: stats for w, stats in windows.items() if w not in overwritten}


def compare(
    store: str, found: dict[Window, list[dict[str, Any]]], windows: dict[Window, dict[str, float]], result: Result
) -> None:
    """Every window once (the ringbuffer and the topic may repeat one), each copy equal."""
    wrong = [f"{store} {w}: {'; '.join(d)}" for w, docs in found.items() if w in windows for doc in docs
             if (d := differs(doc, windows[w]))]  # fmt: skip
    missing = [w for w in windows if w not in found]
    extra = [w for w in found if w not in windows]
    repeats = sum(len(docs) - 1 for docs in found.values())
    result.problems += wrong[:5] + ([f"{store}: {len(wrong)} windows differ"] if len(wrong) > 5 else [])
    if missing:
        result.problems.append(f"{store}: {len(missing)} windows missing, e.g. {sorted(missing)[:3]}")
    if extra:
        result.problems.append(f"{store}: {len(extra)} windows nobody sent readings for, e.g. {sorted(extra)[:3]}")
    if repeats and store not in ("hazelcast", "topic"):
        result.problems.append(f"{store}: {repeats} windows held more than once")
    result.figures.setdefault("windows", {})[store] = {"held": len(found), "repeats": repeats}
    if len(windows) != result.figures["windows"].setdefault("expected", len(windows)):  # the topic's, first
        result.figures["windows"][store]["expected"] = len(windows)  # fewer: some excused (a killed member)


def read_stores(spec: Check, ring: dict[str, int]) -> dict[str, dict[Window, list[dict[str, Any]]]]:
    """Every store's windows; ``ring`` gets the ringbuffer's head sequence (items overwritten)."""
    return {
        "elasticsearch": by_window(elasticsearch_documents(spec)),
        "scylla": by_window(scylla_rows(spec)),
        "hazelcast": by_window(hazelcast_items(spec, ring)),
    }


def by_window(documents: Iterator[dict[str, Any]]) -> dict[Window, list[dict[str, Any]]]:
    found: dict[Window, list[dict[str, Any]]] = defaultdict(list)
    for document in documents:
        found[(document["device_id"], to_ms(document["window_start"]))].append(document)
    return found


def elasticsearch_documents(spec: Check) -> Iterator[dict[str, Any]]:
    from elasticsearch import Elasticsearch
    from elasticsearch.helpers import scan

    client = Elasticsearch(spec.endpoints.elasticsearch_url, request_timeout=30)
    try:
        client.indices.refresh(index=spec.es_alias)
        for hit in scan(client, index=spec.es_alias, query={"query": {"match_all": {}}}):
            yield hit["_source"]
    finally:
        client.close()


def scylla_rows(spec: Check) -> Iterator[dict[str, Any]]:
    from cassandra.cluster import Cluster
    from cassandra.query import dict_factory

    cluster = Cluster([spec.endpoints.cassandra_host], port=spec.endpoints.cassandra_port)
    try:
        session = cluster.connect()
        session.row_factory = dict_factory
        yield from session.execute(f"SELECT * FROM fluxgate.{spec.store_target}")  # noqa: S608 - our own name
    finally:
        cluster.shutdown()


RING_READ_MAX = 999  # read_many refuses a max_count of 1000 or more


def hazelcast_items(spec: Check, ring_info: dict[str, int] | None = None) -> Iterator[dict[str, Any]]:
    from hazelcast.client import HazelcastClient

    client = HazelcastClient(
        cluster_members=[spec.endpoints.hazelcast_address], cluster_name=spec.endpoints.hazelcast_cluster
    )
    try:
        ring = client.get_ringbuffer(spec.store_target).blocking()
        head, tail = ring.head_sequence(), ring.tail_sequence()
        if ring_info is not None:
            ring_info["head"] = head
        for sequence in range(head, tail + 1, RING_READ_MAX):
            for item in ring.read_many(sequence, 1, min(RING_READ_MAX, tail + 1 - sequence)):
                text = item.to_string() if hasattr(item, "to_string") else item  # WITHFORMAT JSON: HazelcastJsonValue
                yield json.loads(text)
    finally:
        client.shutdown()


def dead_letters(spec: Check, sent: Sent, decode: Decoder, cut: CutOff, result: Result) -> None:
    """Every broken payload once or more on the dead-letter topic, with a reason; nothing else."""
    lettered: Counter[bytes] = Counter()
    reasons: Counter[str] = Counter()
    for message in records(spec.endpoints.bootstrap, spec.prefix + "sensors.deadletter"):
        headers = {key: (value or b"").decode(errors="replace") for key, value in message.headers() or []}
        reason = headers.get("fluxgate.dlq.reason", "")
        if not reason:
            result.problems.append(f"dead letter without a reason at {message.partition()}:{message.offset()}")
        reasons[reason.split(":")[0][:60]] += 1
        lettered[message.value() or b""] += 1
    missing = [p for p in sent.broken if p not in lettered and not cut.excused(sent.broken_entries[p])]
    stray = [p for p in lettered if p not in sent.broken]
    if missing:
        result.problems.append(f"{len(missing)} malformed payloads not dead-lettered, e.g. {missing[:2]}")
    if stray:
        result.problems.append(f"{len(stray)} dead letters of payloads that were not malformed, e.g. {stray[:2]}")
    persisters = sum(1 for _ in records(spec.endpoints.bootstrap, spec.prefix + "persisters.deadletter"))
    if persisters:
        result.problems.append(f"{persisters} aggregates dead-lettered by a persister")
    result.figures["dead_letters"] = {
        "malformed_sent": sum(sent.broken.values()),
        "distinct_malformed": len(sent.broken),
        "on_topic": sum(lettered.values()),
        "by_reason": dict(reasons),
    }


if __name__ == "__main__":
    import sys

    outcome = check(load(Path(sys.argv[1]) / "check.json"))
    print(json.dumps({"passed": outcome.passed, "problems": outcome.problems, "figures": outcome.figures}, indent=2))
    sys.exit(0 if outcome.passed else 1)

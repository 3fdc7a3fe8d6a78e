"""Entry point: ``fluxgate-hazelcast-persister`` (or ``python -m fluxgate_hazelcast_persister``).

Exit codes: 0 after a clean drain (SIGTERM/SIGINT), 2 for bad configuration, 1 when the
error policy stopped the persister or Hazelcast/Kafka failed it for good.
"""

from __future__ import annotations

from fluxgate_hazelcast_persister.settings import SERVICE, HazelcastSettings
from fluxgate_hazelcast_persister.sink import HazelcastSink
from fluxgate_sink.cli import persister_main

# The client logs every connection attempt and member-list change at INFO.
QUIET_LOGGERS = ("hazelcast",)


def make_sink(settings: HazelcastSettings) -> HazelcastSink:
    # The offset record is per consumer group: a replay under a new group writes everything again.
    return HazelcastSink(
        settings.hazelcast,
        settings.group_id(),
        semantics=settings.sink.semantics,
        text_values=settings.sink.value_format == "string",
    )


main = persister_main(
    SERVICE,
    HazelcastSettings,
    make_sink,
    description="Persist temperatures.aggregated into Hazelcast structures (configured by FLUXGATE_HZ_*).",
    quiet_loggers=QUIET_LOGGERS,
)

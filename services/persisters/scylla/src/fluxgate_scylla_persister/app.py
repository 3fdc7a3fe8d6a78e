"""Entry point: ``fluxgate-scylla-persister`` (or ``python -m fluxgate_scylla_persister``).

Exit codes: 0 after a clean drain (SIGTERM/SIGINT), 2 for bad configuration (a setting,
or a KCQL statement the table cannot take), 1 when the error policy stopped the persister
or Scylla/Kafka failed it for good (Scylla never answered at start, a table missing ...).
"""

from __future__ import annotations

from fluxgate_core.errors import SettingRefused
from fluxgate_scylla_persister.settings import SERVICE, ScyllaSettings
from fluxgate_scylla_persister.sink import ScyllaSink
from fluxgate_sink.cli import persister_main

# One line per node (dis)connection, schema agreement and protocol downgrade.
QUIET_LOGGERS = ("cassandra", "cassandra.cluster", "cassandra.connection", "cassandra.pool")


def make_sink(settings: ScyllaSettings) -> ScyllaSink:
    try:
        return ScyllaSink(settings.scylla)
    except SettingRefused as exc:  # a CA file that cannot be read: said before anything connects
        raise exc.named(str(ScyllaSettings.model_config.get("env_prefix", ""))) from exc


main = persister_main(
    SERVICE,
    ScyllaSettings,
    make_sink,
    description="Persist temperatures.aggregated into a Scylla/Cassandra table (configured by FLUXGATE_SCYLLA_*).",
    quiet_loggers=QUIET_LOGGERS,
)

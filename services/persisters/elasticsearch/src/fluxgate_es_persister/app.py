"""Entry point: ``fluxgate-es-persister`` (or ``python -m fluxgate_es_persister``).

Exit codes: 0 after a clean drain (SIGTERM/SIGINT), 2 for bad configuration, 1 when the
error policy stopped the persister or Elasticsearch/Kafka failed it for good.
"""

from __future__ import annotations

from fluxgate_core.errors import SettingRefused
from fluxgate_es_persister.retention import Retention
from fluxgate_es_persister.settings import SERVICE, ElasticsearchSettings
from fluxgate_es_persister.sink import GROUP, ElasticsearchSink, families
from fluxgate_sink.cli import persister_main
from fluxgate_sink.kcql import parse
from fluxgate_sink.runner import Task
from fluxgate_sink.sink import Sink

# Their INFO lines are one per HTTP request: a bulk every few hundred milliseconds.
QUIET_LOGGERS = ("elastic_transport.transport", "elasticsearch", "httpx")


def make_sink(settings: ElasticsearchSettings) -> ElasticsearchSink:
    try:  # the client reads the CA file when made: a missing one is a setting to fix, not a crash
        settings.elasticsearch.check_ca_file(GROUP)
    except SettingRefused as exc:
        raise exc.named(str(ElasticsearchSettings.model_config.get("env_prefix", ""))) from exc
    return ElasticsearchSink(settings.elasticsearch)


def make_tasks(settings: ElasticsearchSettings, sink: Sink) -> list[Task]:
    """The retention sweep over this persister's daily indices, unless disabled."""
    if not settings.retention.enabled or not isinstance(sink, ElasticsearchSink):
        return []
    return [Retention(sink.client, families(parse(settings.sink.kcql)), settings.retention).run]


main = persister_main(
    SERVICE,
    ElasticsearchSettings,
    make_sink,
    make_tasks=make_tasks,
    description="Persist temperatures.aggregated into daily Elasticsearch indices (configured by FLUXGATE_ES_*).",
    quiet_loggers=QUIET_LOGGERS,
)

"""Are the topics a running service writes or reads still there?

:func:`fluxgate_core.kafka_access.verify_kafka` makes sure of them at start. A topic deleted
afterwards stops the flow without a word: a producer holds the records for it with no end
(``delivery.timeout.ms`` is unbounded, so an outage is backpressure, never loss), a consumer
logs a warning now and then. :class:`TopicWatch` asks the cluster's metadata every
``interval`` seconds from a daemon thread; a topic gone is logged once, as an error naming it
and its setting, and :meth:`TopicWatch.present` turns false, which the service folds into its
readiness (``/readyz`` 503) until the topic is back.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

import structlog
from confluent_kafka import KafkaException

from fluxgate_core.settings import KafkaSettings
from fluxgate_core.topic_access import admin_client

WATCH_INTERVAL_S = 10.0
log = structlog.get_logger(__name__)


class TopicWatch:
    """The topics of ``topics`` (each mapped to the setting that names it) that have gone missing."""

    def __init__(
        self,
        kafka: KafkaSettings,
        client_id: str,
        topics: Iterable[str] | Mapping[str, str],
        interval: float = WATCH_INTERVAL_S,
    ) -> None:
        self._topics = dict(topics) if isinstance(topics, Mapping) else dict.fromkeys(topics, "")
        self._admin = admin_client(kafka, client_id)
        self._interval = interval
        self._missing: frozenset[str] = frozenset()
        self._stopping = threading.Event()

    def start(self) -> TopicWatch:
        threading.Thread(target=self._watch, name="topic-watch", daemon=True).start()
        return self

    def stop(self) -> None:
        """Never blocks (the daemon thread ends after the request in hand); safe to call twice."""
        self._stopping.set()

    def present(self) -> bool:
        """False while a watched topic is missing (for ``ready()``)."""
        return not self._missing

    @property
    def missing(self) -> frozenset[str]:
        return self._missing

    def check(self) -> None:
        """Ask once; a cluster that does not answer says nothing about the topics (the clients'
        own readiness covers brokers away)."""
        try:
            listed = set(self._admin.list_topics(timeout=min(5.0, self._interval)).topics)
        except KafkaException:
            return
        self.update(frozenset(self._topics) - listed)

    def update(self, missing: frozenset[str]) -> None:
        """Take ``missing`` as the topics gone now; say each change once."""
        for topic in sorted(missing - self._missing):
            log.error(
                "kafka.topic.missing",
                topic=topic,
                setting=self._topics[topic] or None,
                effect="deleted while running (or no longer visible to this client): nothing flows through it, "
                "not ready until it exists again",
            )
        for topic in sorted(self._missing - missing):
            log.info("kafka.topic.back", topic=topic)
        self._missing = missing

    def _watch(self) -> None:
        while not self._stopping.wait(self._interval):
            self.check()

"""The input subject's writer schemas as the registry has them now, not as it had them when
the job started.

A gateway rolled out with a new, compatible schema version writes with its new id the moment
it has registered it. The batch that first meets such an id asks the registry then (one
listing of the subject, not one request per record) and decodes those records with it, so a
good reading never waits in the dead-letter topic for a periodic refresh. Only an id the
registry does not hold under the subject is a dead letter. A registry that does not answer is
asked again a few times; then the batch fails, and Spark runs it again from its checkpoint
once the supervisor resumes the query: records are never judged without the registry.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping

import structlog

from fluxgate_core.backoff import Backoff
from fluxgate_core.errors import RegistryError

log = structlog.get_logger(__name__)
Listing = Callable[[], dict[int, str]]
# Asked this many times, waiting up to 0.5, 1, 2, 4 s in between (7.5 s), before the batch
# fails: a registry restarting answers within that, and a longer outage costs one query restart.
ATTEMPTS = 5
BACKOFF = Backoff(0.5, 4.0)


class RegistryUnavailable(RegistryError):
    """The registry did not answer while a batch needed a writer schema: the batch fails so
    that Spark runs it again, instead of dead-lettering records that may be good."""


class WriterSchemas:
    """Schema id -> schema text of the input subject's versions, learned as batches meet them.

    Read by the query's thread and refreshed by the supervisor's: each change replaces the
    whole mapping, so a reader always sees one consistent set."""

    def __init__(
        self,
        known: Mapping[int, str],
        listing: Listing | None,
        *,
        attempts: int = ATTEMPTS,
        backoff: Backoff = BACKOFF,
    ) -> None:
        self._schemas = dict(known)
        self._listing = listing
        self._attempts = attempts
        self._backoff = backoff

    @property
    def schemas(self) -> dict[int, str]:
        return self._schemas

    def learn(self, ids: Iterable[int]) -> list[int]:
        """Which of ``ids`` (met in a batch, not known yet) the registry holds under the
        subject now; they are known from here on. Raises :class:`RegistryUnavailable`."""
        wanted = sorted(set(ids) - set(self._schemas))
        if not wanted:
            return []
        registered = self._refreshed()
        learned = [schema_id for schema_id in wanted if schema_id in registered]
        unknown = sorted(set(wanted) - set(learned))
        log.info("aggregator.writer_schemas_looked_up", learned=learned, unknown=unknown)
        return learned

    def refresh(self) -> list[int]:
        """Ask the registry once (the supervisor's periodic look); the ids new since.
        Raises :class:`RegistryError` when it does not answer."""
        before = set(self._schemas)
        return sorted(set(self._merged()) - before)

    def _refreshed(self) -> dict[int, str]:
        for attempt in range(1, self._attempts):
            try:
                return self._merged()
            except RegistryError as exc:
                log.warning("aggregator.registry_unreachable", attempt=attempt, error=str(exc))
                time.sleep(self._backoff.delay(attempt - 1))
        try:
            return self._merged()
        except RegistryError as exc:
            raise RegistryUnavailable(f"no writer schemas after {self._attempts} attempts: {exc}") from exc

    def _merged(self) -> dict[int, str]:
        if self._listing is not None:
            self._schemas = {**self._schemas, **self._listing()}
        return self._schemas

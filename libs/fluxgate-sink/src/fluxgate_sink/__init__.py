"""The sink runtime: a persister supplies a :class:`~fluxgate_sink.sink.Sink`, the runner does the rest."""

"""Scylla / Cassandra persister: TemperatureAggregates into one partition per device, metric and day."""

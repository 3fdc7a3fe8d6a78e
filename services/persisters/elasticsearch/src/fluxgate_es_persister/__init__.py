"""Elasticsearch persister: TemperatureAggregates into daily indices behind one alias."""

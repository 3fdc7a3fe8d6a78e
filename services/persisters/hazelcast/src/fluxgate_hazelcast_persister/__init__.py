"""Hazelcast persister: TemperatureAggregates into ringbuffers, queues, maps and reliable topics."""

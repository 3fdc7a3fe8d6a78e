"""aggregator: per-device event-time windows over SensorReadings, emitted once each."""

"""coap-ingest: observes CoAP resources and produces SensorReading records to Kafka."""

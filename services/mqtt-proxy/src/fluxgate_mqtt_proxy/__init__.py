"""mqtt-proxy: MQTT readings into Kafka, acknowledged only once Kafka has them."""

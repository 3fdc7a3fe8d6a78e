"""fluxgate-sim: simulated MQTT and CoAP devices (importable API and the ``fluxgate-sim`` CLI)."""

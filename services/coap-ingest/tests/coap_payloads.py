"""What coap-ingest's integration tests have devices send (on pytest's pythonpath, like the
other packages' shared test modules)."""

from __future__ import annotations

import json

T0 = 1_700_000_000_000  # a fixed start (epoch ms), so a test can name each reading's exact timestamp


def reading_json(device: str, metric: str, value: float, timestamp: int) -> bytes:
    """One reading as a JSON device sends it: its own device id, timestamp and metric."""
    return json.dumps({"sensorId": device, "timestamp": timestamp, metric: value}).encode()

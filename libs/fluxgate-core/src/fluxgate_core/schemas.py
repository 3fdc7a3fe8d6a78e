"""Access to the Avro contracts in the repository's ``schemas/`` folder.

``schemas/`` is the single source of truth. Images copy it and point
``FLUXGATE_SCHEMAS_DIR`` at the copy; a source checkout finds it by walking up.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from fluxgate_core.errors import ConfigError

SENSOR_READING = "sensor_reading"
TEMPERATURE_AGGREGATE = "temperature_aggregate"
DEVICE_STATUS = "device_status"
REPLAY_AUDIT = "replay_audit"
COAP_MESSAGE = "coap_message"


def schemas_dir() -> Path:
    """The folder holding the ``.avsc`` files."""
    configured = os.environ.get("FLUXGATE_SCHEMAS_DIR")
    if configured:
        path = Path(configured)
        if not path.is_dir():
            raise ConfigError(f"FLUXGATE_SCHEMAS_DIR={configured!r} is not a directory")
        return path
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "schemas"
        if (candidate / f"{SENSOR_READING}.avsc").is_file():
            return candidate
    raise ConfigError("cannot find the schemas/ folder: set FLUXGATE_SCHEMAS_DIR")


@cache
def schema_text(name: str) -> str:
    """The ``.avsc`` text of schema ``name`` (file stem), exactly as in the repository."""
    path = schemas_dir() / f"{name}.avsc"
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"no schema {name!r} in {path.parent}") from exc


def schema_dict(name: str) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(schema_text(name))
    return parsed

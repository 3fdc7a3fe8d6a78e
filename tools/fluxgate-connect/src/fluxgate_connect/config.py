"""A Kafka Connect connector config as a flat ``{key: value}``: a ``.properties`` file or the
REST JSON (``{"name": ..., "config": {...}}``), with ``${VAR}`` placeholders filled in from
the environment (``${VAR:-default}`` when the variable may be unset).

An unset variable without a default is an error naming it: a config that silently ran with
an empty host or topic would be worse than one that does not start.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from fluxgate_connect.errors import ConnectError

_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
# A separator is the first unescaped '=' or ':', or else the first whitespace (java.util.Properties).
_SEPARATOR = re.compile(r"(?<!\\)\s*[=:]\s*|(?<!\\)\s+")


def load(path: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """The connector config in ``path``, placeholders expanded from ``environ``."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConnectError(f"{path}: {exc.strerror}") from exc
    raw = parse_json(text, path) if text.lstrip().startswith("{") else parse_properties(text)
    return {key: expand(value, environ, key) for key, value in raw.items()}


def parse_json(text: str, path: Path) -> dict[str, str]:
    """The REST API's body (``{"name", "config"}``) or a bare config object."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ConnectError(f"{path}: not valid JSON: {exc}") from exc
    config = document.get("config", document) if isinstance(document, dict) else None
    if not isinstance(config, dict):
        raise ConnectError(f'{path}: expected {{"name": ..., "config": {{...}}}}')
    flat = {str(key): _text(value) for key, value in config.items()}
    if "name" in document and "config" in document:
        flat.setdefault("name", str(document["name"]))
    return flat


def _text(value: object) -> str:
    # Kafka Connect takes every value as a string; JSON numbers and booleans mean their text.
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value)


def parse_properties(text: str) -> dict[str, str]:
    """``key=value``, ``key: value`` and ``key value`` lines; ``#``/``!`` comments; a trailing
    backslash continues the line. The last of a repeated key wins, as in Java."""
    out: dict[str, str] = {}
    for line in _logical_lines(text):
        match = _SEPARATOR.search(line)
        key, value = (line[: match.start()], line[match.end() :]) if match else (line, "")
        out[_unescape(key)] = _unescape(value)
    return out


def _logical_lines(text: str) -> list[str]:
    lines, pending = [], ""
    for physical in text.splitlines():
        stripped = physical.lstrip()
        if not pending and (not stripped or stripped[0] in "#!"):
            continue
        continued = len(stripped) - len(stripped.rstrip("\\"))
        if continued % 2:  # an odd number of trailing backslashes: the last one escapes the newline
            pending += stripped[:-1]
            continue
        lines.append(pending + stripped)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n", "r": "\r"}.get(m.group(1), m.group(1)), text.strip())


def expand(value: str, environ: Mapping[str, str], key: str) -> str:
    """``value`` with every ``${VAR}`` replaced; an unset VAR without ``:-default`` is an error."""

    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        raise ConnectError(f"{key}: ${{{name}}} is not set in the environment")

    return _PLACEHOLDER.sub(one, value)

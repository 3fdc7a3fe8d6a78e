"""What each KCQL target looks like in Elasticsearch: an index template, its alias, its index names.

A statement ``INSERT INTO temperatures ... WITHINDEXSUFFIX=-{YYYY.MM.dd}`` writes daily
indices ``temperatures-2026.11.23``; one composable template (named after the target)
matches ``temperatures-*``, maps the ``TemperatureAggregate`` fields explicitly and puts
every new daily index into the alias ``temperatures``, so readers query one name.

Why ``dynamic: true`` and not ``strict``: the topic's schema evolves BACKWARD, so a new
optional field may appear any day. ``strict`` would refuse every record after such a
compatible change (all dead letters); dynamic mapping indexes the new field, while the
explicit mappings below still refuse a document whose known field has the wrong type (a
string in ``mean`` is a ``document_parsing_exception`` for that document alone). Strings
of unknown fields map to ``keyword`` (ids, not prose; and the test distribution has no
analysis modules beyond the standard analyzer anyway).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Any

_DATE_TOKENS = {
    "yyyy": r"(?P<year>\d{4})",
    "YYYY": r"(?P<year>\d{4})",
    "MM": r"(?P<month>\d{2})",
    "dd": r"(?P<day>\d{2})",
    "DD": r"(?P<day>\d{2})",
    "HH": r"\d{2}",
    "mm": r"\d{2}",
}
_TOKEN = re.compile("|".join(sorted(map(re.escape, _DATE_TOKENS), key=len, reverse=True)))
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")

TEMPERATURE_AGGREGATE_PROPERTIES: dict[str, Any] = {
    "device_id": {"type": "keyword"},
    "metric": {"type": "keyword"},
    "unit": {"type": "keyword"},
    "window_start": {"type": "date"},
    "window_end": {"type": "date"},
    "first_event_time": {"type": "date"},
    "last_event_time": {"type": "date"},
    "count": {"type": "long"},
    "min": {"type": "double"},
    "max": {"type": "double"},
    "mean": {"type": "double"},
    "stddev": {"type": "double"},
}


@dataclass(frozen=True, slots=True)
class IndexFamily:
    """The indices one statement writes: ``target`` plus an optional dated ``suffix``."""

    target: str
    suffix: str | None = None

    @property
    def daily(self) -> bool:
        return bool(self.suffix) and _PLACEHOLDER.search(self.suffix or "") is not None

    @property
    def wildcard(self) -> str:
        """The index pattern of the template: the target and the suffix's literal prefix, then ``*``."""
        if not self.daily:
            return self.target
        assert self.suffix is not None
        return self.target + self.suffix.split("{", 1)[0] + "*"

    @property
    def alias(self) -> str | None:
        """Every dated index joins an alias named after the target; an undated target is the index itself."""
        return self.target if self.daily else None

    def name_pattern(self) -> re.Pattern[str]:
        """A regex that matches exactly the names this family writes, capturing year, month, day."""
        suffix = self.suffix or ""
        parts: list[str] = []
        position = 0
        for placeholder in _PLACEHOLDER.finditer(suffix):
            parts.append(re.escape(suffix[position : placeholder.start()]))
            parts.append(_date_regex(placeholder.group(1)))
            position = placeholder.end()
        parts.append(re.escape(suffix[position:]))
        return re.compile(re.escape(self.target) + "".join(parts))

    def date_of(self, index: str) -> date | None:
        """The date in an index's name, None for a name outside this family (or an impossible date)."""
        found = self.name_pattern().fullmatch(index)
        if found is None or "year" not in found.groupdict():
            return None
        groups = found.groupdict()
        try:
            return date(int(groups["year"]), int(groups.get("month") or 1), int(groups.get("day") or 1))
        except ValueError:
            return None


def _date_regex(pattern: str) -> str:
    out: list[str] = []
    position = 0
    seen: set[str] = set()
    for token in _TOKEN.finditer(pattern):
        out.append(re.escape(pattern[position : token.start()]))
        regex = _DATE_TOKENS[token.group()]
        group = re.search(r"\?P<(\w+)>", regex)
        if group and group.group(1) in seen:  # a field repeated in one pattern: match, don't capture twice
            regex = regex.replace(f"?P<{group.group(1)}>", "?:")
        if group:
            seen.add(group.group(1))
        out.append(regex)
        position = token.end()
    out.append(re.escape(pattern[position:]))
    return "".join(out)


def index_template(family: IndexFamily, *, shards: int, replicas: int) -> dict[str, Any]:
    """The body of ``PUT _index_template/<target>`` for one family."""
    template: dict[str, Any] = {
        "settings": {"index": {"number_of_shards": shards, "number_of_replicas": replicas}},
        "mappings": {
            "dynamic": True,
            "date_detection": False,
            "dynamic_templates": [
                {"strings_as_keywords": {"match_mapping_type": "string", "mapping": {"type": "keyword"}}}
            ],
            "properties": TEMPERATURE_AGGREGATE_PROPERTIES,
        },
    }
    if family.alias:
        template["aliases"] = {family.alias: {}}
    return {
        "index_patterns": [family.wildcard],
        # Above the built-in templates (priority 100 at most), so ours wins for these names.
        "priority": 200,
        "template": template,
        "_meta": {"managed_by": "fluxgate-es-persister"},
    }

"""The shortcuts for what devices mostly send give what the general path gives."""

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fluxgate_core.errors import PayloadError
from fluxgate_core.limits import DEFAULT_LIMITS
from fluxgate_core.payloads import _JSON, JsonFields, Measurement, _from_document, _load_json, parse_object, parse_time


def _general_time(raw: int) -> int:
    """What parse_time does with a number: seconds below 1e11, else milliseconds, through a double."""
    number = float(raw)
    return round(number * 1000) if abs(number) < 1e11 else round(number)


@given(st.integers(-(2**60), 2**60) | st.integers(10**11 - 5, 10**11 + 5) | st.integers(2**53 - 5, 2**53 + 5))
def test_integer_times_are_what_the_double_gives(raw: int) -> None:
    assert parse_time(raw, "t") == _general_time(raw)


_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.none(),
    st.text(max_size=5),
)


@given(st.dictionaries(st.sampled_from(["sensorId", "timestamp", "seq", "unit", "temperature", "site", "x"]), _VALUES))
def test_a_dict_gives_what_the_mapping_path_gives(document: dict[str, Any]) -> None:
    class NotADict(dict[str, Any]):
        """A Mapping that is not exactly a dict: takes the general path."""

    assert _outcome(lambda: _from_document(document, JsonFields(), DEFAULT_LIMITS, senml_only=False)) == _outcome(
        lambda: parse_object(NotADict(document))
    )


def test_a_dict_is_still_refused_where_only_senml_is_wanted() -> None:
    with pytest.raises(PayloadError, match="SenML"):
        _from_document({"temperature": 1.0}, JsonFields(), DEFAULT_LIMITS, senml_only=True)


def _outcome(parse: Any) -> Any:
    try:
        measurements: list[Measurement] = parse()
    except PayloadError as exc:
        return str(exc)
    # NaN != NaN: compare what a reading would carry, with NaN made comparable.
    return [tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in m) for m in measurements]


_JSON_TEXTS = st.one_of(
    st.dictionaries(st.text(max_size=3), _VALUES | st.lists(st.integers(), max_size=2), max_size=4).map(json.dumps),
    st.text(alphabet='{}[]":,0123 a\\\ufeff', max_size=16),
    st.sampled_from(['{"a":1,"a":2}', '{"a":1} ', ' {"a":1}', '{"a":1}{"b":2}', '{"a":1}\n', '{"a":[1', "{}"]),
)


@given(_JSON_TEXTS, st.booleans())
def test_an_object_alone_loads_as_the_whole_decoder_loads_it(text: str, bom: bool) -> None:
    payload = (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8", "surrogatepass")
    assert _loaded(lambda: _load_json(payload)) == _loaded(lambda: _JSON.decode(payload.decode("utf-8-sig")))


def _loaded(load: Any) -> Any:
    try:
        return ("ok", json.dumps(load(), sort_keys=True))
    except (PayloadError, ValueError) as exc:  # the decoder alone raises ValueError, _load_json wraps it
        return ("error", str(exc).removeprefix("payload is not valid JSON: "))

"""jsonfast: the JSON of the hot paths is the JSON the standard library reads back, whatever the input."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from draguard.harness.core import jsonfast

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


_json64 = st.recursive(  # what decoding keeps exact: integers of 64 bits (see the module's docstring)
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_json)
def test_dumps_is_read_back_by_json(value: object) -> None:
    assert json.loads(jsonfast.dumps(value)) == value  # integers beyond 64 bits included (json takes them)


@given(_json64)
def test_loads_reads_what_json_writes(value: object) -> None:
    assert jsonfast.loads(json.dumps(value)) == value


def test_an_integer_beyond_64_bits_is_decoded_as_a_float() -> None:
    """The one documented difference from ``json.loads``."""
    assert jsonfast.loads("-9223372036854775808") == -(2**63) and jsonfast.loads("18446744073709551615") == 2**64 - 1
    for text in ("-9223372036854775809", "18446744073709551616"):
        assert jsonfast.loads(text) == float(text) and json.loads(text) == int(text)


def test_dumps_is_compact_utf8_and_keeps_or_sorts_key_order() -> None:
    assert jsonfast.dumps({"b": 1, "a": [1, "é"]}) == '{"b":1,"a":[1,"é"]}'.encode()
    assert jsonfast.dumps({"b": 1, "a": 2}, sort_keys=True) == b'{"a":2,"b":1}'


def test_what_orjson_refuses_is_encoded_as_json_encodes_it() -> None:
    assert jsonfast.dumps({"n": 2**70}) == b'{"n":1180591620717411303424}'
    assert jsonfast.dumps({1: "x"}) == b'{"1":"x"}'
    with pytest.raises(TypeError):
        jsonfast.dumps({"x": object()})


@pytest.mark.parametrize("bad", [b"", b"{", b"NaN", b'{"a":1}x', b"\xff"])
def test_bad_input_is_a_json_decode_error(bad: bytes) -> None:
    with pytest.raises(json.JSONDecodeError):
        jsonfast.loads(bad)

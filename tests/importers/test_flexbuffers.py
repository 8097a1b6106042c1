"""The FlexBuffer map reader of custom operators' options: every map of numbers and booleans FlexBuffers writes
reads back; truncated or foreign bytes give one FlexBufferError."""

from __future__ import annotations

import pytest
from flatbuffers import flexbuffers
from hypothesis import given, settings
from hypothesis import strategies as st

from tinycc_ml.importers.flexbuffers import FlexBufferError, read_map

# floats within +-1e30: flatbuffers' writer fails near float32's limit
VALUES = st.one_of(st.integers(-(2**63), 2**63 - 1), st.booleans(), st.floats(-1e30, 1e30))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=24), VALUES, max_size=12))
def test_maps_read_back(options):
    assert read_map(bytes(flexbuffers.Dumps(options))) == options


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_give_a_map_or_one_error(data):
    try:
        read_map(data)
    except FlexBufferError:
        pass


@pytest.mark.parametrize("value", [[1, 2], "text", {"inner": 1}])
def test_values_other_than_numbers_are_refused_by_name(value):
    with pytest.raises(FlexBufferError, match="value 'key'"):
        read_map(bytes(flexbuffers.Dumps({"key": value})))


def test_truncated_map_is_refused():
    data = bytes(flexbuffers.Dumps({"fft_length": 512, "T": 7}))
    with pytest.raises(FlexBufferError):
        read_map(data[4:])

"""The exp table's stated maximum error holds against numpy's exp over its whole input range."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinycc_ml.ir.ops.tables import exp_lut_value
from tinycc_ml.passes.exp_table import build_exp_lut


@settings(max_examples=25, deadline=None)
@given(lo=st.floats(-12.0, -0.5), width_bits=st.integers(8, 14), s_out=st.integers(12, 15))
def test_stated_error_is_the_true_maximum_over_every_input(lo, width_bits, s_out):
    s_in = width_bits  # a range of 1.0 .. 16 in real units covered at 2^-width_bits resolution
    lo_q = max(int(np.floor(lo * 2.0**s_in)), -(2**15))
    hi_q = 0
    attrs, stated, size = build_exp_lut(lo_q, hi_q, s_in, s_out, 16)
    xs = np.arange(lo_q, hi_q + 1)
    got = exp_lut_value(xs, attrs, s_out, 16) * 2.0**-s_out
    truth = np.minimum(np.exp(xs * 2.0**-s_in), 32767 * 2.0**-s_out)
    assert np.max(np.abs(got - truth)) == pytest.approx(stated, rel=1e-12, abs=1e-15)
    assert size == 2 * (len(attrs["table_hi"]) + len(attrs["table_lo"]))


def test_default_bound_is_met_with_small_tables():
    # ProtoNN-like exponent range [-11, 0] at scale 2^-11, output at 2^-15
    lo_q, s_in, s_out = int(-11 * 2**11), 11, 15
    attrs, err, size = build_exp_lut(lo_q, 0, s_in, s_out, 16)
    assert err <= 2.0**-10
    assert size <= 1024  # far below one entry per representable input (22529 of them)
    # a tighter bound costs more bytes and gives less error
    attrs2, err2, size2 = build_exp_lut(lo_q, 0, s_in, s_out, 16, max_error=2.0**-13)
    assert err2 <= 2.0**-13 and size2 > size


def test_inputs_outside_the_range_saturate_to_the_edges():
    attrs, _, _ = build_exp_lut(-4096, 0, 10, 15, 16)
    inside = exp_lut_value(np.array([-4096, 0]), attrs, 15, 16)
    outside = exp_lut_value(np.array([-30000, 2000]), attrs, 15, 16)
    assert outside.tolist() == inside.tolist()

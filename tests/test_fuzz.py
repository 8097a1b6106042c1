"""Fuzzing that stays in the suite: hypothesis drives the mutators of tests/fuzzing.py over model
files (zip structure, member bytes, .npy headers, metadata JSON, values) and IR text. Every case
ends in a tinycc_ml error or in success, and success means C that gcc compiles warnings-clean.
scripts/fuzz.py runs the same mutators for thousands of cases."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import require_target
from tests.fuzzing import Chooser, mutate_ir_text, mutate_model_file, run_ir_case, run_model_file_case

FUZZ = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module", autouse=True)
def host_compiler():
    require_target("host")


@FUZZ
@given(st.data(), st.sampled_from(["float", "int16", "int8"]))
def test_mutated_model_files_fail_cleanly_or_compile(data, precision):
    outcome = run_model_file_case(mutate_model_file(Chooser(data)), precision)
    assert outcome.kind in ("ok", "error"), outcome.detail


@FUZZ
@given(st.data())
def test_mutated_ir_text_fails_cleanly_or_compiles(data):
    outcome = run_ir_case(mutate_ir_text(Chooser(data)))
    assert outcome.kind in ("ok", "error"), outcome.detail


def test_the_fuzzers_reach_both_outcomes():
    """A fuzzer that only ever errors (or only ever succeeds) tests little: over a fixed set of
    cases both outcomes occur for both inputs."""
    import random

    for mutate, run in ((mutate_model_file, run_model_file_case), (mutate_ir_text, run_ir_case)):
        rng = random.Random(5)
        kinds = {run(mutate(Chooser(rng=rng))).kind for _ in range(60)}
        assert kinds == {"ok", "error"}, kinds

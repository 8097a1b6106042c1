"""Shared pytest helpers.

require_target(target, m0_method="auto")
    Call at the top of a test that needs a cross toolchain or simulator ("avr", "cortex-m0",
    "host"). When something is missing the test is skipped, with the reason naming the Debian
    packages to install; but when the environment variable TINYCC_ML_REQUIRE_TOOLCHAINS=1 is set
    (CI sets it) the test fails instead, so a broken CI image cannot pass by skipping.

        from tests.conftest import require_target

        def test_on_avr():
            require_target("avr")
            ...

    The same check is available as fixtures: `avr_target`, `m0_target`, `host_target`, or the
    parametrizable `sim_target` (use with indirect parametrization, it returns the target name):

        @pytest.mark.parametrize("sim_target", ["avr", "cortex-m0"], indirect=True)
        def test_both(sim_target):
            run_on_target(sim_target, ...)
"""

from __future__ import annotations

import os
import re
import subprocess
import time

import pytest
from hypothesis import settings

from tinycc_ml.errors import ToolchainError
from tinycc_ml.runtime import toolchains

REQUIRE_ENV = "TINYCC_ML_REQUIRE_TOOLCHAINS"

# CI (.ci/run) draws the same examples on every run (none replayed from a local example database), so a red
# CI is a reproducible one; workstations draw new ones each run (and scripts/fuzz.py explores further)
settings.register_profile("ci", derandomize=True, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def toolchains_required() -> bool:
    """True when missing toolchains must fail tests instead of skipping them."""
    return os.environ.get(REQUIRE_ENV, "").strip() not in ("", "0", "false", "no")


def require_target(target: str, m0_method: str = "auto") -> None:
    """Skip (or, with TINYCC_ML_REQUIRE_TOOLCHAINS=1, fail) unless `target` can be built and run."""
    try:
        toolchains.require_target(target, m0_method)
    except ToolchainError as exc:
        reason = f"{target}: {exc}"
        if toolchains_required():
            pytest.fail(f"{reason} ({REQUIRE_ENV}=1)", pytrace=False)
        pytest.skip(reason)


def simavr_uart_lines(elf, done, timeout: float = 60) -> list[str]:
    """What an ATmega328P firmware prints on its UART in simavr (colour codes removed), read until ``done(lines)``
    says enough, the program stops printing, or ``timeout`` seconds pass; simavr is then stopped."""
    proc = subprocess.Popen(["simavr", "-m", "atmega328p", "-f", "16000000", str(elf)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not done(lines):
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(re.sub(r"\x1b\[[0-9;]*m", "", line))
    finally:
        proc.kill()
        proc.wait()
    return lines


def require_tools(*names: str) -> None:
    """Skip (or fail, like require_target) unless every program in ``names`` is on PATH."""
    import shutil

    missing = [name for name in names if shutil.which(name) is None]
    if missing:
        packages = [p for name in missing for p in toolchains.TOOL_PACKAGES.get(name, (name,))]
        reason = f"{', '.join(missing)} not on PATH; {toolchains.install_hint(packages)}"
        if toolchains_required():
            pytest.fail(f"{reason} ({REQUIRE_ENV}=1)", pytrace=False)
        pytest.skip(reason)


@pytest.fixture
def avr_target() -> str:
    require_target("avr")
    return "avr"


@pytest.fixture
def m0_target() -> str:
    require_target("cortex-m0")
    return "cortex-m0"


@pytest.fixture
def host_target() -> str:
    require_target("host")
    return "host"


@pytest.fixture
def sim_target(request) -> str:
    """Indirectly parametrized with a target name; skips/fails like require_target."""
    target = getattr(request, "param", None)
    if target is None:
        raise ValueError("sim_target needs indirect parametrization with a target name")
    require_target(target)
    return target

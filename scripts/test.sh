#!/usr/bin/env bash
# Install everything the tests need, then run them: bash scripts/test.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-$(command -v python || command -v python3)}"
# The tests start some hundred Python processes (xdist workers, the command line, fit's workers): with
# PYTHONDONTWRITEBYTECODE each would compile every module and pytest re-rewrite every test file anew.
unset PYTHONDONTWRITEBYTECODE
export PIP_ROOT_USER_ACTION=ignore
pip_flags=(--quiet --disable-pip-version-check)
# A distribution's own Python (Debian 12: /usr/bin/python3) refuses pip installs outside a venv.
if [ -z "${VIRTUAL_ENV:-}" ] && "$PY" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["stdlib"], "EXTERNALLY-MANAGED")))'; then
    pip_flags+=(--break-system-packages)
fi
"$PY" -m pip install "${pip_flags[@]}" -e '.[dev]'
# the outside backend examples (RISC-V, ESP8266), installed as a plug-in would be: their tests run with the rest
"$PY" -m pip install "${pip_flags[@]}" -e examples/tinycc-ml-riscv
"$PY" -m pip install "${pip_flags[@]}" -e examples/tinycc-ml-esp8266

can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }

# The host tests build C through cffi: a C compiler and Python's headers.
host_packages=()
command -v gcc >/dev/null 2>&1 || host_packages+=(gcc libc6-dev binutils)
"$PY" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    || host_packages+=(python3-dev)
if [ "${#host_packages[@]}" -gt 0 ] && can_apt; then
    echo "scripts/test.sh: installing ${host_packages[*]} with apt-get" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${host_packages[@]}" >/dev/null
fi

# Cross toolchains and simulators for the AVR, Cortex-M0, RISC-V and ESP8266 tests; CMake, Ninja, Make and
# arduino-mk (Arduino's core for avr-gcc) for the build-integration tests.
have_toolchains() {
    command -v avr-gcc >/dev/null 2>&1 \
        && command -v arm-none-eabi-gcc >/dev/null 2>&1 \
        && command -v qemu-system-arm >/dev/null 2>&1 \
        && command -v cmake >/dev/null 2>&1 && command -v ninja >/dev/null 2>&1 \
        && command -v make >/dev/null 2>&1 \
        && [ -f /usr/include/simavr/sim_avr.h ] \
        && command -v riscv64-unknown-elf-gcc >/dev/null 2>&1 \
        && command -v qemu-system-riscv32 >/dev/null 2>&1 \
        && [ -f /usr/lib/picolibc/riscv64-unknown-elf/picolibc.specs ] \
        && command -v xtensa-lx106-elf-gcc >/dev/null 2>&1 \
        && command -v qemu-system-xtensa >/dev/null 2>&1 \
        && [ -f /usr/lib/xtensa-lx106-elf/picolibc.specs ] \
        && [ -f /usr/share/arduino/Arduino.mk ]
}
if ! have_toolchains; then
    if can_apt; then
        echo "scripts/test.sh: installing cross toolchains and simulators with apt-get" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends \
            gcc-avr avr-libc binutils-avr simavr libsimavr-dev \
            gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm cmake ninja-build make \
            gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf qemu-system-misc arduino-mk \
            gcc-xtensa-lx106 binutils-xtensa-lx106 picolibc-xtensa-lx106-elf >/dev/null
    else
        echo "scripts/test.sh: note: avr-gcc, arm-none-eabi-gcc, qemu-system-arm, simavr headers, cmake, ninja or make are" \
             "missing and cannot be installed here (needs root and apt-get); simulator tests will skip" >&2
    fi
fi

# One pytest worker per core (pytest-xdist); each test module runs whole on one worker, so the models
# its fixtures train are trained once. TINYCC_ML_TEST_WORKERS=0 runs in this process.
# pytest's exit status 5 ("no tests collected") is a failure here, as is any other non-zero status.
status=0
"$PY" -m pytest -n "${TINYCC_ML_TEST_WORKERS:-auto}" --dist loadscope "$@" || status=$?
if [ "$status" -eq 5 ]; then
    echo "scripts/test.sh: error: pytest collected no tests" >&2
fi
exit "$status"

"""Locate the cross compilers and simulators the runtime needs.

`find_tool(name)` returns an executable's path or raises ToolchainError naming the Debian
package(s) that provide it; `have_target(target)` says whether everything needed to build and
simulate for a target is present (tests use it to skip).
"""

from __future__ import annotations

import importlib.util
import os
import shutil

from tinycc_ml.codegen.backend import BACKENDS, get_backend
from tinycc_ml.errors import ToolchainError
from tinycc_ml.plugins import PluginError
from tinycc_ml.runtime.simulate import SIMULATORS

# Debian packages that provide each tool; one apt-get line in the error message.
TOOL_PACKAGES: dict[str, tuple[str, ...]] = {
    "avr-gcc": ("gcc-avr", "avr-libc"),
    "avr-size": ("binutils-avr",),
    "avr-nm": ("binutils-avr",),
    "avr-objcopy": ("binutils-avr",),
    "arm-none-eabi-gcc": ("gcc-arm-none-eabi", "libnewlib-arm-none-eabi"),
    "arm-none-eabi-size": ("binutils-arm-none-eabi",),
    "arm-none-eabi-nm": ("binutils-arm-none-eabi",),
    "qemu-system-arm": ("qemu-system-arm",),
    "riscv64-unknown-elf-gcc": ("gcc-riscv64-unknown-elf", "picolibc-riscv64-unknown-elf"),
    "qemu-system-riscv32": ("qemu-system-misc",),
    "gcc": ("gcc",),
    "cc": ("gcc",),
    "cmake": ("cmake",),
    "ninja": ("ninja-build",),
    "make": ("make",),
}

SIMAVR_PACKAGES = ("simavr", "libsimavr-dev")
SIMAVR_INCLUDE_DIRS = ("/usr/include/simavr", "/usr/local/include/simavr")


def install_hint(packages: tuple[str, ...] | list[str]) -> str:
    return "install it with: apt-get install -y --no-install-recommends " + " ".join(packages)


def find_tool(name: str) -> str:
    """Path of executable `name` on PATH; ToolchainError naming the Debian packages otherwise."""
    path = shutil.which(name)
    if path is None:
        packages = TOOL_PACKAGES.get(name, (name,))
        raise ToolchainError(f"{name} not found on PATH; {install_hint(packages)}")
    return path


def find_host_cc() -> str:
    """The host C compiler: $CC if set, else gcc, else cc."""
    cc = os.environ.get("CC")
    if cc and shutil.which(cc):
        return shutil.which(cc)  # type: ignore[return-value]
    for name in ("gcc", "cc"):
        path = shutil.which(name)
        if path:
            return path
    raise ToolchainError(f"no host C compiler (gcc/cc) on PATH; {install_hint(('gcc',))}")


def find_simavr_include() -> str:
    """Directory holding libsimavr's headers (sim_avr.h)."""
    extra = os.environ.get("TINYCC_ML_SIMAVR_INCLUDE")
    for d in ((extra,) if extra else ()) + SIMAVR_INCLUDE_DIRS:
        if os.path.isfile(os.path.join(d, "sim_avr.h")):
            return d
    raise ToolchainError(f"libsimavr headers (sim_avr.h) not found; {install_hint(SIMAVR_PACKAGES)}")


def have_qemu() -> bool:
    return shutil.which("qemu-system-arm") is not None


def have_unicorn() -> bool:
    """Unicorn and pyelftools importable (the fast Cortex-M0 path)."""
    return all(importlib.util.find_spec(m) is not None for m in ("unicorn", "elftools"))


def _all_found(check) -> bool:
    try:
        check()
    except ToolchainError:
        return False
    return True


def require_target(target: str, m0_method: str = "auto") -> None:
    """Raise ToolchainError if anything needed to build and run `target`'s builds is missing: what its
    backend's ``require_tools`` says, or, for a name only the simulator registry knows, that simulator's."""
    try:
        if target in BACKENDS:
            get_backend(target).require_tools(m0_method)
        else:
            SIMULATORS.load(target).require(m0_method)
    except PluginError as exc:
        raise ToolchainError(f"cannot build and run target {target!r}: {exc}") from exc


def have_target(target: str, m0_method: str = "auto") -> bool:
    """True when `target` can be built and simulated here."""
    return _all_found(lambda: require_target(target, m0_method))

"""Per-function cost of one compiled model on a simulated chip: where the cycles (ATmega328P, simavr)
or instructions (Cortex-M0, unicorn) of one predict call go.

    function_profile(target, sources, header, prefix, x, n_scores, input_ctype, score_ctype)
        -> {symbol: cycles or instructions per predict call}

AVR: the simavr runner sums the cycles spent at each program address inside the timed calls (predict
and scores, per row), avr-nm maps addresses to symbols (an asm kernel without a size runs up to the
next symbol). Cortex-M0: unicorn runs predict on each row and gives each executed basic block's
instructions to the symbol it starts in (needs the optional unicorn and pyelftools packages).
Counts are averages over the calls; exact per call when every row takes the same path.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from tinycc_ml.errors import ToolchainError

PROFILED_TARGETS = ("avr", "cortex-m0", "cortex-m4", "cortex-m33")


def function_profile(target: str, sources, header, prefix: str, x: np.ndarray, n_scores: int, input_ctype: str,
                     score_ctype: str, extra_cflags=()) -> dict[str, float]:
    from tinycc_ml.runtime.simulate import make_spec

    x = np.asarray(x)
    spec = make_spec([str(s) for s in sources], str(header), prefix, x.shape[1], n_scores, input_ctype, score_ctype,
                     extra_cflags)
    if target == "avr":
        return _avr(spec, x)
    if target in PROFILED_TARGETS[1:]:
        return _m0(spec, x, target)
    raise ToolchainError(f"no per-function profile for target {target} (only {', '.join(PROFILED_TARGETS)})")


def _avr_symbols(elf: str) -> list[tuple[int, str]]:
    from tinycc_ml.runtime import toolchains

    out = subprocess.run([toolchains.find_tool("avr-nm"), "-n", elf], capture_output=True, text=True,
                         check=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW" and not parts[2].startswith(".L"):
            addr = int(parts[0], 16)
            if addr < 0x800000:  # flash, not data
                syms.append((addr, parts[2].split(".")[0]))  # gcc's clones (f.constprop.0) count as f
    return syms


def _avr(spec, x: np.ndarray) -> dict[str, float]:
    from tinycc_ml.runtime import sim_avr

    sim_avr.require()
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-prof-") as work:
        fw = sim_avr.build(spec, work)
        n = x.shape[0]
        rows = np.concatenate([np.ones((n, 1), np.uint8), np.ascontiguousarray(x).view(np.uint8).reshape(n, -1)],
                              axis=1)
        inp, outp, prof = (os.path.join(work, f) for f in ("in.bin", "out.bin", "prof.txt"))
        Path(inp).write_bytes(rows.tobytes() + b"\x00")
        proc = subprocess.run([sim_avr.runner_path(), fw.bin, inp, outp, str(10**10), str(10**8), "atmega328p",
                               "16000000", prof], capture_output=True)
        if proc.returncode != 0 or not os.path.exists(prof):
            raise ToolchainError(f"simavr profile run failed (exit {proc.returncode}): "
                                 f"{proc.stderr.decode(errors='replace')[-300:]}")
        counts = np.loadtxt(prof, dtype=np.int64, ndmin=2)
        syms = _avr_symbols(fw.elf)
    addrs = np.array([a for a, _ in syms])
    per: dict[str, float] = {}
    for pc, cyc in counts:
        i = int(np.searchsorted(addrs, pc, side="right")) - 1
        name = syms[i][1] if i >= 0 else "?"
        per[name] = per.get(name, 0) + int(cyc)
    calls = 2 * n  # the harness times predict and scores for each row
    return {k: v / calls for k, v in per.items()}


def _m0(spec, x: np.ndarray, target: str = "cortex-m0") -> dict[str, float]:
    """Cortex-M0 or, on its Board, another Cortex-M simulator (integer builds: unicorn's FPU stays off)."""
    try:
        from elftools.elf.elffile import ELFFile
        from unicorn import UC_ARCH_ARM, UC_HOOK_BLOCK, UC_MODE_MCLASS, UC_MODE_THUMB, Uc, arm_const
        from unicorn.arm_const import UC_ARM_REG_LR, UC_ARM_REG_R0, UC_ARM_REG_SP
    except ImportError as exc:
        raise ToolchainError(f"a Cortex-M profile needs the unicorn and pyelftools packages ({exc})") from None
    from tinycc_ml.runtime import sim_m0
    from tinycc_ml.runtime.simulate import SIMULATORS

    board = SIMULATORS.load(target).board
    flash_base, ram_base = board.chip.flash_base, board.chip.ram_base
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-m0prof-") as work:
        fw = sim_m0._Objects(spec, work, board=board).link(None, "prof")
        uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB | UC_MODE_MCLASS)
        if hasattr(arm_const, board.unicorn_cpu):  # unicorn >= 2.0.1
            uc.ctl_set_cpu_model(getattr(arm_const, board.unicorn_cpu))
        uc.mem_map(flash_base, board.chip.flash)
        uc.mem_map(ram_base, board.chip.ram)
        with open(fw.elf, "rb") as f:
            elf = ELFFile(f)
            for seg in elf.iter_segments():
                if seg["p_type"] == "PT_LOAD" and seg["p_memsz"]:
                    data = seg.data()
                    uc.mem_write(seg["p_vaddr"], data + bytes(seg["p_memsz"] - len(data)))
            symtab = elf.get_section_by_name(".symtab")
            funcs = sorted((s["st_value"] & ~1, s.name.split(".")[0]) for s in symtab.iter_symbols()
                           if s.name and s["st_info"]["type"] in ("STT_FUNC", "STT_NOTYPE")
                           and not s.name.startswith(("$", ".")) and s["st_value"] < ram_base)
            syms = {s.name: s["st_value"] for s in symtab.iter_symbols() if s.name}
    addrs = np.array([a for a, _ in funcs])
    per: dict[str, float] = {}
    sizes: dict[tuple[int, int], tuple[str, int]] = {}

    def on_block(uc_, address, size, _data):
        key = (address, size)
        if key not in sizes:
            i = int(np.searchsorted(addrs, address, side="right")) - 1
            sizes[key] = (funcs[i][1] if i >= 0 else "?", sim_m0._thumb_count(bytes(uc_.mem_read(address, size))))
        name, c = sizes[key]
        per[name] = per.get(name, 0) + c

    uc.hook_add(UC_HOOK_BLOCK, on_block)
    x_addr = (syms["__bss_end"] + 7) & ~7
    top = ram_base + board.chip.ram
    trap = flash_base + board.chip.flash - 16
    for row in x:
        uc.mem_write(x_addr, row.tobytes())
        uc.reg_write(UC_ARM_REG_R0, x_addr)
        uc.reg_write(UC_ARM_REG_SP, top)
        uc.reg_write(UC_ARM_REG_LR, trap | 1)
        uc.emu_start(syms[spec.prefix + "_predict"] | 1, trap)
    return {k: v / len(x) for k, v in per.items()}


def kernel_costs(node_functions: dict[str, list[str]], choices: list[dict], profile: dict[str, float],
                 prefix: str, unit: str) -> list[dict]:
    """Per graph node whose code calls kernel functions: its op's kernel, the measured cost (the calls'
    functions in the profile; a function called by several nodes is split evenly between them) and,
    for a matrix whose kernel a cost model chose, the choice and its predicted cost."""
    users: dict[str, int] = {}
    for syms in node_functions.values():
        for s in set(syms):
            users[s] = users.get(s, 0) + 1
    by_node = {c.get("node"): c for c in choices if c.get("node")}
    out = []
    for node, syms in node_functions.items():
        measured = sum(profile.get(s, 0.0) / users[s] for s in set(syms))
        row = {"node": node, "functions": [s.removeprefix(prefix + "_") for s in syms],
               f"measured_{unit}": round(measured, 1)}
        choice = by_node.get(node)
        if choice is not None:
            row.update(matrix=choice["matrix"], kernel=choice["kernel"],
                       **{f"predicted_{unit}": choice.get("predicted_cycles")},
                       **({"note": choice["note"]} if choice.get("note") else {}))
        out.append(row)
    for node, choice in by_node.items():  # a choice whose code has no function of its own (inline C)
        if node not in node_functions:
            out.append({"node": node, "functions": [], f"measured_{unit}": None, "matrix": choice["matrix"],
                        "kernel": choice["kernel"], f"predicted_{unit}": choice.get("predicted_cycles"),
                        "note": "; ".join(filter(None, [choice.get("note"), "inline C: not measured apart"]))})
    return out


PROFILE_ROWS = 2  # rows profiled for the per-kernel costs (every row of a model takes nearly one path)


def measure_kernels(backend, out_dir, output, X) -> dict:
    """target_report's "kernels" entry for a build the backend can profile (it has ``profile``): the unit,
    the rows profiled, "per_node" (kernel_costs), "total" per predict call and "outside_kernels" (C code
    between the kernels: loops of the run function, argmax); else {"unavailable": why}."""
    from tinycc_ml.runtime.simulate import SIMULATORS

    if not hasattr(backend, "profile"):
        return {"unavailable": f"target {backend.name} has no per-function profile"}
    try:
        prof = backend.profile(out_dir, output, np.asarray(X)[:PROFILE_ROWS])
    except ToolchainError as exc:
        return {"unavailable": str(exc).splitlines()[0]}
    unit = SIMULATORS.load(backend.simulator).unit if getattr(backend, "simulator", None) else "cycles"
    per_node = kernel_costs(output.node_functions, output.kernels, prof, output.prefix, unit)
    total = sum(prof.values())
    inside = sum(r[f"measured_{unit}"] or 0 for r in per_node)
    return {"unit": unit, "rows": int(min(len(X), PROFILE_ROWS)), "total": round(total, 1),
            "outside_kernels": round(total - inside, 1), "per_node": per_node}

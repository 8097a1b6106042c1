"""Per-function Cortex-M0 instruction breakdown of one compiled model: unicorn runs <prefix>_predict
on each row, each executed basic block's instructions go to the symbol it starts in.

    from m0_profile import m0_profile
    rows = m0_profile(files, prefix, x_int16, n_scores, input_ctype, score_ctype)  # [(symbol, instr)]

Counts are per predict call, averaged over the rows of x (exact: the same count the simulators report).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from tinycc_ml.runtime import sim_m0
from tinycc_ml.runtime.simulate import make_spec


def m0_profile(files: dict[str, str], prefix: str, x: np.ndarray, n_scores: int, input_ctype: str,
               score_ctype: str) -> list[tuple[str, float]]:
    from elftools.elf.elffile import ELFFile
    from unicorn import UC_ARCH_ARM, UC_HOOK_BLOCK, UC_MODE_MCLASS, UC_MODE_THUMB, Uc
    from unicorn.arm_const import UC_ARM_REG_LR, UC_ARM_REG_R0, UC_ARM_REG_SP

    with tempfile.TemporaryDirectory(prefix="tinycc-ml-m0prof-") as work:
        for name, text in files.items():
            Path(work, name).write_text(text)
        spec = make_spec([os.path.join(work, f"{prefix}.c")], os.path.join(work, f"{prefix}.h"), prefix,
                         x.shape[1], n_scores, input_ctype, score_ctype)
        fw = sim_m0._Objects(spec, work).link(None, "prof")
        uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB | UC_MODE_MCLASS)
        uc.mem_map(sim_m0.FLASH_BASE, sim_m0.FLASH_SIZE)
        uc.mem_map(sim_m0.RAM_BASE, sim_m0.RAM_SIZE)
        with open(fw.elf, "rb") as f:
            elf = ELFFile(f)
            for seg in elf.iter_segments():
                if seg["p_type"] == "PT_LOAD" and seg["p_memsz"]:
                    data = seg.data()
                    uc.mem_write(seg["p_vaddr"], data + bytes(seg["p_memsz"] - len(data)))
            symtab = elf.get_section_by_name(".symtab")
            funcs = sorted((s["st_value"] & ~1, s.name) for s in symtab.iter_symbols()
                           if s.name and s["st_info"]["type"] in ("STT_FUNC", "STT_NOTYPE")
                           and not s.name.startswith(("$", ".")) and s["st_value"] < sim_m0.RAM_BASE)
            syms = {s.name: s["st_value"] for s in symtab.iter_symbols() if s.name}
    addrs = np.array([a for a, _ in funcs])
    per: dict[str, int] = {}
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
    top = sim_m0.RAM_BASE + sim_m0.RAM_SIZE
    trap = sim_m0.FLASH_BASE + sim_m0.FLASH_SIZE - 16
    for row in x:
        uc.mem_write(x_addr, row.tobytes())
        uc.reg_write(UC_ARM_REG_R0, x_addr)
        uc.reg_write(UC_ARM_REG_SP, top)
        uc.reg_write(UC_ARM_REG_LR, trap | 1)
        uc.emu_start(syms[f"{prefix}_predict"] | 1, trap)
    return sorted(((k, v / len(x)) for k, v in per.items()), key=lambda kv: -kv[1])

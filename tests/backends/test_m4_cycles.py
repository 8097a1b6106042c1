"""The Cortex-M4 cycle model (tinycc_ml/arm/m4_cycles.py) against the Technical Reference Manual's figures:
each sequence below is assembled with arm-none-eabi-as and priced; the expected cycles are the TRM's (ARM DDI
0439 Table 3-1 and section 3.3.2's worked examples), not the model's output."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import require_tools
from tinycc_ml.arm import m4_cycles

# (assembly, cycles at zero wait states, where the TRM says so)
TRM_SEQUENCES = [
    ("mov r0, r1", 1, "Table 3-1: MOV"),
    ("add r0, r1, r2", 1, "Table 3-1: ADD"),
    ("mul r0, r1, r2", 1, "Table 3-1: MUL"),
    ("mla r0, r1, r2, r3", 1, "Table 3-1: MLA"),
    ("smull r0, r1, r2, r3", 1, "Table 3-1: SMULL"),
    ("smlal r0, r1, r2, r3", 1, "Table 3-1: SMLAL"),
    ("smlad r0, r1, r2, r3", 1, "Table 3-1: SMLAD"),
    ("ssat r0, #8, r1", 1, "Table 3-1: SSAT"),
    ("sxtb16 r0, r1", 1, "Table 3-1: SXTB16"),
    ("ldr r0, [r1]", 2, "Table 3-1: LDR"),
    ("ldrsh r0, [r1, #2]", 2, "Table 3-1: LDRSH"),
    ("ldr r0, [r1]\nldr r1, [r2]", 3, "3.3.2: normally three cycles total"),
    ("ldr r0, [r1, r2]\nstr r0, [r3, #20]", 3, "3.3.2: normally three cycles total"),
    ("ldr r0, [r1, r2]\nstr r1, [r3, r2]", 3, "3.3.2: normally three cycles total"),
    ("ldr r0, [r1, r5]\nldr r1, [r2]\nldr r2, [r3, #4]", 4, "3.3.2: normally four cycles total"),
    ("ldr r0, [r1]\nldr r2, [r0]", 4, "3.3.2: the first load's result forms the next address: not pipelined"),
    ("str r0, [r1, #4]", 1, "3.3.2: STR Rx,[Ry,#imm] is always one cycle"),
    ("str r0, [r1, r2]", 2, "Table 3-1: STR (register offset: nothing pipelines after it)"),
    ("add r1, r1, #4\nldr r0, [r1]", 4, "3.3.2: an address from the preceding data processing stalls a cycle"),
    ("ldrd r0, r1, [r2]", 3, "Table 3-1: LDRD 1 + N"),
    ("strd r0, r1, [r2]", 3, "Table 3-1: STRD 1 + N"),
    ("ldm r0, {r1-r4}", 5, "Table 3-1: LDM 1 + N"),
    ("stm r0!, {r1-r3}", 4, "Table 3-1: STM 1 + N"),
    ("push {r4-r7, lr}", 6, "Table 3-1: PUSH 1 + N"),
    ("pop {r4-r7}", 5, "Table 3-1: POP 1 + N"),
    ("ldr pc, [r0]", 5, "3.3.2: two cycles for the load and three for the pipeline reload"),
    ("tbb [pc, r0]", 6, "3.3.2: two for the load, one for the add, three for the reload"),
    ("vadd.f32 s0, s1, s2", 1, "FPU: VADD"),
    ("vmul.f32 s0, s1, s2", 1, "FPU: VMUL"),
    ("vmla.f32 s0, s1, s2", 3, "FPU: VMLA"),
    ("vfma.f32 s0, s1, s2", 3, "FPU: VFMA"),
    ("vdiv.f32 s0, s1, s2", 14, "FPU: VDIV"),
    ("vsqrt.f32 s0, s1", 14, "FPU: VSQRT"),
    ("vldr s0, [r0]", 2, "FPU: VLDR"),
    ("vpush {s16-s19}", 5, "FPU: VPUSH 1 + N"),
    ("vcvt.s32.f32 s0, s0", 1, "FPU: VCVT"),
]


def assemble(source: str, tmp_path) -> bytes:
    require_tools("arm-none-eabi-as", "arm-none-eabi-objcopy")
    asm, obj, binary = tmp_path / "seq.s", tmp_path / "seq.o", tmp_path / "seq.bin"
    asm.write_text(".syntax unified\n.thumb\n" + source + "\n")
    subprocess.run(["arm-none-eabi-as", "-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16", "-o", str(obj), str(asm)],
                   check=True)
    subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", "-j", ".text", str(obj), str(binary)], check=True)
    return binary.read_bytes()


@pytest.mark.toolchain
@pytest.mark.parametrize("source, cycles, where", TRM_SEQUENCES, ids=[s.replace("\n", "; ") for s, *_ in TRM_SEQUENCES])
def test_the_model_gives_the_trm_cycles(source, cycles, where, tmp_path):
    assert m4_cycles.straight_line_cycles(assemble(source, tmp_path)) == cycles, where


@pytest.mark.toolchain
def test_wait_states_price_flash_reads_and_refills(tmp_path):
    code = assemble("ldr r0, [r1]\nldr r2, [r3]", tmp_path)
    decode = m4_cycles.Decoder(lambda a, n: (code + bytes(4))[a: a + n])
    counter = m4_cycles.CycleCounter(decode, wait_states=2, flash=(0, 0x1000))
    counter.step(0)
    counter.flash_reads(1)
    counter.step(2)
    assert counter.finish() == 3 + 2  # one of the two loads read flash


@pytest.mark.parametrize("dividend, divisor, low, high", [(0, 5, 2, 2), (7, 0, 2, 2), (1, 1, 3, 3),
                                                          (0xFFFFFFFF, 1, 12, 12), (1 << 20, 3, 2, 12)])
def test_a_divide_takes_2_to_12_cycles(dividend, divisor, low, high):
    assert low <= m4_cycles._divide_cycles(dividend, divisor, signed=False) <= high


@pytest.mark.toolchain
def test_a_loop_in_the_emulator_prices_taken_and_final_branches(tmp_path):
    """The stream as unicorn executes it: 10 passes of a two-instruction loop; 9 taken branches at 1 + P (P = 2,
    the model's refill to a speculated 16-bit target), the last not taken (1), an IT-skipped move (1)."""
    from unicorn import UC_ARCH_ARM, UC_HOOK_CODE, UC_MODE_MCLASS, UC_MODE_THUMB, Uc

    code = assemble("movs r2, #10\n1: subs r2, #1\nbne 1b\ncmp r2, #1\nit eq\nmoveq r3, r2\nnop", tmp_path)
    uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB | UC_MODE_MCLASS)
    uc.mem_map(0, 0x1000)
    uc.mem_write(0, code)
    decode = m4_cycles.Decoder(lambda a, n: uc.mem_read(a, n))
    counter = m4_cycles.CycleCounter(decode)
    uc.hook_add(UC_HOOK_CODE, lambda uc_, address, size, _: counter.step(address))
    uc.emu_start(1, len(code))
    assert counter.finish() == 1 + 9 * (1 + 1 + 2) + (1 + 1) + 1 + 1 + 1 + 1
    assert counter.instructions == 1 + 10 * 2 + 4  # the skipped move counted too, as QEMU counts it


@pytest.fixture(scope="module")
def mlp():
    from sklearn.datasets import load_digits
    from sklearn.neural_network import MLPClassifier

    X, y = load_digits(return_X_y=True)
    return MLPClassifier((16,), max_iter=200, random_state=0).fit(X, y), X


@pytest.mark.toolchain
@pytest.mark.parametrize("target, precision", [("cortex-m4", "int16"), ("cortex-m4", "float"), ("cortex-m33", "int8")])
def test_the_priced_stream_is_the_one_qemu_counts(mlp, target, precision, tmp_path):
    """Every instruction QEMU counts in a predict call is priced (unicorn's stream, IT-skipped ones included),
    each at least a cycle; flash wait states only add."""
    import tinycc_ml
    from tests.conftest import require_target
    from tinycc_ml.codegen.backend import get_backend

    require_target(target)
    model, X = mlp
    rows = X[:3]
    result = tinycc_ml.compile(model, target=target, precision=precision, calibration=X[:200], out_dir=tmp_path,
                               name="cyc")
    backend = get_backend(target)
    run = backend.simulate(tmp_path, result.output, rows)
    count = backend.model_cycles(tmp_path, result.output, rows)
    assert count.instructions.tolist() == list(run.instructions)
    assert (count.cycles > count.instructions).all()
    assert sum(count.per_function.values()) == pytest.approx(count.cycles.mean())
    slow = backend.model_cycles(tmp_path, result.output, rows, wait_states=2)
    assert (slow.cycles > count.cycles).all() and slow.instructions.tolist() == count.instructions.tolist()

"""The public target API: everything a target needs, in one module. The in-tree targets (``tinycc_ml.host``,
``tinycc_ml.avr``, ``tinycc_ml.arm``) are written against it alone, as an outside plug-in is
(``examples/tinycc-ml-riscv``); a test keeps it so.

**Backends.** A target is a ``Backend`` subclass registered under a name (entry-point group
``tinycc_ml.backends``, or ``register_backend`` at run time). What it can do besides ``emit`` is declared by
the methods it overrides (``CAPABILITIES``: load, simulate, profile, project_files, arduino_library); the
command line, ``tinycc-ml report``, ``tinycc_ml.fit`` and the profiler ask ``backend.supports(name)``, never
its name, and a missing capability is a ``CapabilityError`` naming the target and what it lacks.

A microcontroller subclasses ``McuBackend``: a ``Chip`` (memory, clock, compiler and linker flags), a
``c_target(graph)`` (a ``CTarget``: how constants are declared and read, its ``kernels``; ``WordFlash`` for
constants in flash that may only be read as aligned 32-bit words), the name of a
``Simulator`` registered in ``SIMULATORS`` (entry-point group ``tinycc_ml.simulators``), and optionally a
``Board`` for ``--project`` firmware (``arduino_library`` makes ``--arduino`` libraries for a chip on an
Arduino core). It then gets the shared MCU emitter (``McuEmitter``: streaming, ``predict_float``), the fit
check (FitError with the sizes), ``simulate`` and ``profile``. ``TargetAttributes`` are what a backend
tells the passes (``Backend.target_attributes``).

**Hand-written kernels.** A ``Kernel`` replaces the shared C of one op at one precision: it claims the
nodes it takes (``claims``: operand types, shapes, constants), emits their C or inline asm through the
``CEmitter`` (helpers, constants and their ``ConstLayout``, scratch memory: see ``Kernel``), and may state
its ``KernelCost`` (cycles, flash) for the choice among the kernels that claim a node. ``CTarget.kernels``
lists them in the order the emitter asks. The building blocks the in-tree kernels share are here too: the
fixed-point C helpers (``shift_c``, ``store``, ``saturate_c``, ...: the op semantics' rounding and
saturation in C), the fused element-wise chains (``chain_shift``, ``chain_last``, ``identity_chain``, ...),
constant layouts, the 16-bit input clamp any target can take (``kernel_clip16``), the proven asm epilogue
of a mat-vec and its chain (``fold``), the sparse mat-vec planning (``sparse_matvec_plan``, ``choose_kernel``)
and kNN's block helpers (``knn_*``).

**Simulators.** A simulator built on the portable measurement harness (``harness_source()``, its C file
documents the five board functions and the line protocol) is a ``HarnessSimulator``: a board file, the
tools, and the command that runs an ELF. ``parse_harness_output`` reads the protocol for a simulator that
runs firmware its own way; ``compile_objects``, ``run_tool``, ``model_symbol_sizes``, ``elf_sizes`` and the
``find_*`` / ``have_*`` tool look-ups are the build helpers the built-in simulators use.
``tinycc_ml.testing`` holds the conformance checks a target runs.

The names in ``__all__`` are the API: they keep their meaning across releases; anything else of
tinycc_ml's modules may change.
"""

from __future__ import annotations

from tinycc_ml.buildsys.arduino import arduino_library
from tinycc_ml.buildsys.project import Board, cmake_support_file
from tinycc_ml.cache import cache_root, private_dir
from tinycc_ml.chips import Chip
from tinycc_ml.codegen.backend import (
    BACKENDS,
    CAPABILITIES,
    Backend,
    BuildOutput,
    CapabilityError,
    Fit,
    available_backends,
    get_backend,
    register_backend,
    targets_supporting,
)
from tinycc_ml.codegen.c_fixed import (
    chain_last,
    chain_shift,
    chain_sum_loop,
    exp_lut_lines,
    exp_tables,
    fused_tanh,
    identity_chain,
    index_type,
    node_kernels_only,
    rshift_c,
    saturate_bits_c,
    saturate_c,
    shared_x_readers,
    shift_c,
    sole_vector_user,
    store,
    tanh_lut_lines,
    tanh_mul_loop,
    tanh_of_mul,
    wsqdist_out,
)
from tinycc_ml.codegen.c_float import wsqdist_arrays
from tinycc_ml.codegen.c_front_end import log_mel_base, log_mel_loop
from tinycc_ml.codegen.c_network import (
    MAX_SOFTMAX_DEPTH,
    AddQuantisation,
    LayerQuantisation,
    PoolWindow,
    Window,
    add_quantisation,
    clipped_taps,
    layer_quantisation,
    pool_window,
    require_computed,
    window_geometry,
    window_loops,
    window_of,
)
from tinycc_ml.codegen.c_network_pow2 import layer_store
from tinycc_ml.codegen.emitter import CEmitter, CTarget, ctype_of
from tinycc_ml.codegen.folded_epilogue import fold, output_bias, run_chain
from tinycc_ml.codegen.input_bound import beyond_function, has_bound, no_answer_function, outside
from tinycc_ml.codegen.input_clamp import clip_loop_head, clip_loop_start, clip_ok, kernel_clip16
from tinycc_ml.codegen.kernels import Kernel, KernelCost, choose_kernel
from tinycc_ml.codegen.knn_blocks import (
    knn_distance_expr,
    knn_fusable,
    knn_kernel_rows,
    knn_tail,
    knn_vote_store,
)
from tinycc_ml.codegen.layouts import Block, BlockedLayout, ConstLayout, InterleavedBounds, SplitLayout
from tinycc_ml.codegen.matvec_plan import (
    PAGE_COLS,
    KernelChoice,
    SparseDecision,
    SparsePlan,
    clamp_lines,
    csc_flash,
    csc_function,
    fusable_clamp,
    int_matrix,
    run_lengths,
    sparse_flash,
    sparse_matvec_plan,
    split8,
    used_list,
)
from tinycc_ml.codegen.mcu import McuBackend, McuEmitter
from tinycc_ml.codegen.small_network import small_network_kernels
from tinycc_ml.codegen.word_flash import WordFlash
from tinycc_ml.errors import CompileError, DataError, FitError, ToolchainError
from tinycc_ml.ir.analyses import task_kind
from tinycc_ml.ir.fixed import quantise, quantise_affine
from tinycc_ml.ir.graph import Node
from tinycc_ml.ir.ops.arith import align_shifts, rshift, storage_clip_bounds
from tinycc_ml.ir.ops.c_primitives import c_helper, clamp8, reciprocal, requantise
from tinycc_ml.ir.ops.ensembles import (
    default_left,
    distinct_rows,
    forest_levels,
    leaf_ints,
    leaf_scale,
    missing_code,
    threshold_ints,
)
from tinycc_ml.ir.ops.linalg import wsqdist_product_shift, wsqdist_terms
from tinycc_ml.ir.ops.network.batch_matmul import batch_multiplier, matrix_shape
from tinycc_ml.ir.ops.network.lstm import UNIT_SCALE as LSTM_UNIT_SCALE
from tinycc_ml.ir.ops.network.lstm import cell_tanh_parameters as lstm_cell_tanh_parameters
from tinycc_ml.ir.ops.network.lstm import fc_multiplier as lstm_fc_multiplier
from tinycc_ml.ir.ops.network.lstm import lstm_cell_c, lstm_hidden_c
from tinycc_ml.ir.ops.network.lstm import mul_multiplier as lstm_mul_multiplier
from tinycc_ml.ir.ops.network.lstm import quantised_clip as lstm_quantised_clip
from tinycc_ml.ir.ops.network.mul import multiplier as mul_multiplier
from tinycc_ml.ir.ops.network.svdf import output_multiplier as svdf_output_multiplier
from tinycc_ml.ir.ops.network.svdf import state_multiplier as svdf_state_multiplier
from tinycc_ml.ir.ops.registry import node_output_shift
from tinycc_ml.ir.ops.shape import pad_fill
from tinycc_ml.ir.ops.signal.kissfft import plan as kissfft_plan
from tinycc_ml.ir.ops.signal.kissfft import tables as kissfft_tables
from tinycc_ml.ir.ops.tflite_arith import (
    SOFTMAX_ACCUMULATION_INTEGER_BITS,
    activation_range,
    exp_on_negative_values,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    saturating_rounding_doubling_high_mul,
    softmax_parameters,
    wrap32,
)
from tinycc_ml.ir.ops.tflite_sigmoid import SIGMOID_TABLE
from tinycc_ml.passes.manager import TargetAttributes
from tinycc_ml.plugins import PluginError
from tinycc_ml.progress import wait_all
from tinycc_ml.runtime.harness import (
    HarnessRows,
    HarnessSimulator,
    elf_sizes,
    harness_source,
    input_image_source,
    parse_harness_output,
)
from tinycc_ml.runtime.simulate import (
    DEFAULT_MAX_CYCLES,
    INPUT_DTYPES,
    SCORE_DTYPES,
    SIMULATORS,
    BuildSpec,
    FirmwareSizes,
    Simulator,
    TargetRun,
    compile_objects,
    linked_once,
    model_symbol_sizes,
    run_tool,
    support_file,
)
from tinycc_ml.runtime.toolchains import (
    SIMAVR_PACKAGES,
    find_host_cc,
    find_simavr_include,
    find_tool,
    have_qemu,
    have_unicorn,
    install_hint,
)
from tinycc_ml.version import __version__ as compiler_version

__all__ = [
    # backends and their registry
    "BACKENDS", "CAPABILITIES", "Backend", "BuildOutput", "CapabilityError", "Fit", "McuBackend", "McuEmitter",
    "CTarget", "CEmitter", "Chip", "Board", "TargetAttributes", "available_backends", "get_backend",
    "register_backend", "targets_supporting", "arduino_library", "cmake_support_file", "compiler_version",
    "WordFlash",
    # errors
    "CompileError", "DataError", "FitError", "PluginError", "ToolchainError",
    # hand-written kernels: the API, the graph and the op semantics they read
    "Kernel", "KernelCost", "KernelChoice", "choose_kernel", "Node", "node_output_shift", "storage_clip_bounds",
    "align_shifts", "quantise", "quantise_affine", "task_kind", "ctype_of", "rshift",
    # GaussianNB's weighted distances (wsqdist): the terms a class stores, the product shift, the shared C's pieces
    "wsqdist_terms", "wsqdist_product_shift", "wsqdist_arrays", "wsqdist_out",
    # TFLite network layers: their int8 arithmetic and window geometry (codegen/c_network.py)
    "AddQuantisation", "LayerQuantisation", "Window", "add_quantisation", "layer_quantisation", "window_of",
    "PoolWindow", "pool_window", "requantise", "clamp8",
    "multiply_by_quantized_multiplier", "activation_range", "quantize_multiplier", "mul_multiplier", "pad_fill",
    "MAX_SOFTMAX_DEPTH", "SOFTMAX_ACCUMULATION_INTEGER_BITS", "exp_on_negative_values",
    "saturating_rounding_doubling_high_mul", "softmax_parameters", "wrap32", "reciprocal", "batch_multiplier",
    "matrix_shape", "svdf_output_multiplier", "svdf_state_multiplier", "lstm_cell_c", "lstm_hidden_c",
    "LSTM_UNIT_SCALE", "lstm_fc_multiplier", "lstm_mul_multiplier", "lstm_cell_tanh_parameters", "lstm_quantised_clip",
    "SIGMOID_TABLE",
    # C helpers emitted once per model; kissfft's FFT plan and twiddle tables (ir/ops/signal/kissfft.py)
    "c_helper", "kissfft_plan", "kissfft_tables",
    # the front end's fused log mel power (ir/ops/front_end/log_mel_power.py): its exponent and its mel/log loop in C
    "log_mel_base", "log_mel_loop",
    # TFLite int8 layers for chips without SIMD (codegen/small_network.py): the AVR's and the Cortex-M0's
    "small_network_kernels",
    # the project's fixed-point network layers: window loops and the store (codegen/c_network_pow2.py)
    "clipped_taps", "require_computed", "window_geometry", "window_loops", "layer_store",
    # fixed-point C and fused chains
    "store", "shift_c", "rshift_c", "saturate_c", "saturate_bits_c", "index_type", "chain_shift", "chain_sum_loop",
    "chain_last", "identity_chain", "sole_vector_user", "node_kernels_only", "shared_x_readers", "exp_lut_lines",
    "exp_tables", "fused_tanh", "tanh_lut_lines", "tanh_mul_loop", "tanh_of_mul", "fold", "output_bias",
    "run_chain",
    # float builds' input bound: rows beyond it get no class (codegen/input_bound.py)
    "beyond_function", "has_bound", "no_answer_function", "outside",
    # tree ensembles' stored nodes: thresholds, leaves and missing values as integers (ir/ops/ensembles.py)
    "default_left", "distinct_rows", "forest_levels", "leaf_ints", "leaf_scale", "missing_code", "threshold_ints",
    # constant layouts, the input clamp, sparse mat-vec planning, kNN blocks
    "ConstLayout", "Block", "BlockedLayout", "SplitLayout", "InterleavedBounds", "clip_loop_head",
    "clip_loop_start", "clip_ok", "kernel_clip16", "PAGE_COLS", "SparsePlan", "SparseDecision", "clamp_lines",
    "csc_flash", "csc_function", "fusable_clamp", "int_matrix", "run_lengths", "sparse_flash", "sparse_matvec_plan",
    "split8", "used_list", "knn_distance_expr", "knn_fusable", "knn_kernel_rows", "knn_tail", "knn_vote_store",
    # simulators and builds
    "DEFAULT_MAX_CYCLES", "INPUT_DTYPES", "SCORE_DTYPES", "SIMULATORS", "BuildSpec", "FirmwareSizes", "HarnessRows",
    "HarnessSimulator", "Simulator", "TargetRun", "compile_objects", "elf_sizes", "harness_source",
    "input_image_source", "linked_once", "model_symbol_sizes", "parse_harness_output", "run_tool", "support_file",
    "SIMAVR_PACKAGES", "find_host_cc", "find_simavr_include", "find_tool", "have_qemu", "have_unicorn",
    "install_hint", "cache_root", "private_dir", "wait_all",
]

"""The host backend: portable C99 for the machine running the compiler, loaded through cffi."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tinycc_ml.host.batch import HostEmitter
from tinycc_ml.host.build import load_host_build
from tinycc_ml.host.network import average_pool2d_host, conv2d_host, depthwise_conv2d_host, fully_connected_host
from tinycc_ml.target import Backend, BuildOutput, CEmitter, CTarget, Kernel, Node, TargetRun, find_host_cc, task_kind


def matvec_float_columns(em: CEmitter, node: Node) -> list[str] | None:
    """A float mat-vec by a dense constant over the columns: W stored transposed, each x[k] added into
    every row's sum, the inner loop over rows (independent sums: the C compiler vectorises it without
    reordering a sum, so the result is the row-wise loop's to the bit)."""
    a_name, x_name = node.inputs
    g = em.graph
    if g.op(a_name) != "const" or g.op(x_name) in ("const", "sparse_const") or node.type.rank != 1:
        return None
    rows, cols = g.type(a_name).shape
    if rows < 4:
        return None
    wt = em.const_transposed(a_name)
    if em.target.word_flash is None:
        row = [f"        const float *w = {wt} + (long)k * {rows};",
               f"        for (int i = 0; i < {rows}; ++i) acc[i] += w[i] * xk;"]
    else:  # constants read only as words (CTarget.word_flash): each through the target's read
        w = em.target.read_const(wt, f"(long)k * {rows} + i", "float")
        row = [f"        for (int i = 0; i < {rows}; ++i) acc[i] += {w} * xk;"]
    return ["{", f"    float acc[{rows}];", f"    for (int i = 0; i < {rows}; ++i) acc[i] = 0.0f;",
            f"    for (int k = 0; k < {cols}; ++k) {{", f"        const float xk = {em.at(x_name, 'k')};", *row,
            "    }",
            f"    for (int i = 0; i < {rows}; ++i) {em.var(node.name)}[i] = acc[i];", "}"]


HOST_KERNELS = (Kernel("matvec", matvec_float_columns, precision="float"),
                # TFLite's int8 layers: blocked products vectorised for the host (host/network.py)
                Kernel("conv2d", conv2d_host), Kernel("depthwise_conv2d", depthwise_conv2d_host),
                Kernel("fully_connected", fully_connected_host), Kernel("average_pool2d", average_pool2d_host))


def emit_c(graph, prefix: str, target: CTarget, model_description: list[str]) -> BuildOutput:
    return CEmitter(graph, prefix, target, header_lines=model_description).build_output()


class HostBackend(Backend):
    name = "host"
    description = "C99 for the host (gcc/clang), runnable from Python through cffi"
    precisions = ("float", "int16", "int8")
    network_ops = None  # TFLite networks: the shared C, equal to the interpreter's int8 on every byte

    def emit(self, graph, prefix, model_description):
        target = CTarget("host", kernels=HOST_KERNELS)
        return HostEmitter(graph, prefix, target, header_lines=model_description).build_output()

    def require_tools(self, method: str = "auto") -> None:

        find_host_cc()

    def load(self, out_dir: Path, output: BuildOutput):
        return load_host_build(Path(out_dir), output)

    def simulate(self, out_dir: Path, output: BuildOutput, X):

        predictor = self.load(out_dir, output)
        kind = task_kind(output.task)
        return TargetRun(target=self.name, predictions=np.asarray(predictor.predict_index(X)),
                         scores=np.asarray(predictor.scores(X)), cycles=None, instructions=None,
                         stack_bytes=None, flash_bytes=None, ram_bytes=None, model_flash_bytes=output.const_bytes,
                         model_ram_bytes=output.ram_bytes, method="cffi",
                         values=predictor.values_raw(X) if kind == "regression" else None,
                         labels=predictor.labels(X) if kind == "multilabel" else None)

"""The host backend: portable C99 for the machine running the compiler, loaded through cffi."""

from __future__ import annotations

from pathlib import Path

from tinycc_ml.backends.base import Backend, BuildOutput, register_backend
from tinycc_ml.backends.c_emitter import CEmitter, CTarget


def emit_c(graph, prefix: str, target: CTarget, model_description: list[str]) -> BuildOutput:
    return CEmitter(graph, prefix, target, header_lines=model_description).build_output()


@register_backend
class HostBackend(Backend):
    name = "host"
    description = "C99 for the host (gcc/clang), runnable from Python through cffi"
    precisions = ("float", "int16", "int8")

    def emit(self, graph, prefix, model_description):
        return emit_c(graph, prefix, CTarget("host"), model_description)

    def load(self, out_dir: Path, output: BuildOutput):
        from tinycc_ml.runtime.host import load_host_build

        return load_host_build(Path(out_dir), output)

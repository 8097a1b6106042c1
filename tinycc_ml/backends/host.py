"""The host backend: portable C99 for the machine running the compiler, loaded through cffi."""

from __future__ import annotations

from pathlib import Path

from tinycc_ml.backends.base import Backend, BuildOutput, register_backend
from tinycc_ml.backends.c_emitter import CEmitter, CTarget


def emit_c(graph, prefix: str, target: CTarget, model_description: list[str]) -> BuildOutput:
    emitter = CEmitter(graph, prefix, target, header_lines=model_description)
    emitted = emitter.emit()
    return BuildOutput(
        files={f"{prefix}.h": emitted.header, f"{prefix}.c": emitted.source},
        prefix=prefix,
        input_ctype=emitted.input_ctype,
        score_ctype=emitted.score_ctype,
        input_dim=emitted.input_dim,
        n_scores=emitted.n_scores,
        const_bytes=emitted.const_bytes,
        ram_bytes=emitted.arena_bytes,
        input_scale=getattr(graph, "input_scale", None),
    )


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

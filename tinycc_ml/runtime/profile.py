"""Per-function cost of one compiled model on a simulated chip: where the cycles (ATmega328P, simavr)
or instructions (Cortex-M0, unicorn) of one predict call go; and the Cortex-M4/M33's cycles from its cycle
model (``function_cycles``, ``measure_cycles``).

    function_profile(target, sources, header, prefix, x, n_scores, input_ctype, score_ctype)
        -> {symbol: cycles or instructions per predict call}

Each simulator that can profiles itself (``Simulator.profile``).
AVR: the simavr runner sums the cycles spent at each program address inside the timed calls (predict
and scores, per row), avr-nm maps addresses to symbols (an asm kernel without a size runs up to the
next symbol). Cortex-M0: unicorn runs predict on each row and gives each executed basic block's
instructions to the symbol it starts in (needs the optional unicorn and pyelftools packages).
Counts are averages over the calls; exact per call when every row takes the same path.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import ToolchainError
from tinycc_ml.runtime.simulate import SIMULATORS, check_inputs, make_spec


def function_profile(simulator: str, sources, header, prefix: str, x: np.ndarray, n_scores: int, input_ctype: str,
                     score_ctype: str, chip=None, extra_cflags=()) -> dict[str, float]:
    """{symbol: cycles or instructions per predict call} from the simulator's ``profile`` (optional in the
    Simulator protocol); ToolchainError when it has none."""
    sim = SIMULATORS.load(simulator)
    if not callable(getattr(sim, "profile", None)):
        raise ToolchainError(f"simulator {simulator} has no per-function profile")
    x = check_inputs(x, input_ctype)  # the simulators send the array's bytes: the model's input type, exactly
    spec = make_spec([str(s) for s in sources], str(header), prefix, x.shape[1], n_scores, input_ctype, score_ctype,
                     extra_cflags, chip=chip)
    return sim.profile(spec, x)


def function_cycles(simulator: str, sources, header, prefix: str, x: np.ndarray, n_scores: int, input_ctype: str,
                    score_ctype: str, chip=None, extra_cflags=(), wait_states: int = 0):
    """``CycleCount`` (cycles and instructions per row, cycles per call by symbol) from the simulator's cycle
    model (``cycles``, optional in the
    Simulator protocol: the Cortex-M4/M33 price the executed instructions with the TRM's timings);
    ToolchainError when it has none."""
    sim = SIMULATORS.load(simulator)
    if not callable(getattr(sim, "cycles", None)):
        raise ToolchainError(f"simulator {simulator} has no cycle model")
    x = check_inputs(x, input_ctype)
    spec = make_spec([str(s) for s in sources], str(header), prefix, x.shape[1], n_scores, input_ctype, score_ctype,
                     extra_cflags, chip=chip)
    return sim.cycles(spec, x, wait_states)


def kernel_costs(node_functions: dict[str, list[str]], choices: list[dict], profile: dict[str, float],
                 prefix: str, unit: str, node_steps: dict[str, str] | None = None) -> list[dict]:
    """Per graph node whose code calls kernel functions, in the order the code runs them (``node_steps``' order):
    what it computes in words ("step", from ``node_steps``; the node's IR name where there are none), its op's
    kernel, the measured cost (the calls' functions in the profile; a function called by several nodes is
    split evenly between them) and, for a matrix whose kernel a cost model chose, the choice and its
    predicted cost."""
    node_steps = node_steps or {}
    users: dict[str, int] = {}
    for syms in node_functions.values():
        for s in set(syms):
            users[s] = users.get(s, 0) + 1
    by_node = {c.get("node"): c for c in choices if c.get("node")}
    out = []
    for node, syms in node_functions.items():
        measured = sum(profile.get(s, 0.0) / users[s] for s in set(syms))
        row = {"node": node, "step": node_steps.get(node, node),
               "functions": [s.removeprefix(prefix + "_") for s in syms],
               f"measured_{unit}": round(measured, 1)}
        choice = by_node.get(node)
        if choice is not None:
            row.update(matrix=choice.get("matrix"), kernel=choice["kernel"],
                       **{f"predicted_{unit}": choice.get("predicted_cycles")},
                       **({"note": choice["note"]} if choice.get("note") else {}))
        out.append(row)
    for node, choice in by_node.items():  # a choice whose code has no function of its own (inline C)
        if node not in node_functions:
            out.append({"node": node, "step": node_steps.get(node, node), "functions": [],
                        f"measured_{unit}": None, "matrix": choice.get("matrix"),
                        "kernel": choice["kernel"], f"predicted_{unit}": choice.get("predicted_cycles"),
                        "note": "; ".join(filter(None, [choice.get("note"), "inline C: not measured apart"]))})
    order = {node: i for i, node in enumerate(node_steps)}
    return sorted(out, key=lambda row: order.get(row["node"], len(order)))


PROFILE_ROWS = 2  # rows profiled for the per-kernel costs (every row of a model takes nearly one path)


def measure_kernels(backend, out_dir, output, X) -> dict:
    """target_report's "kernels" entry for a build the backend can profile (it has ``profile``): the unit,
    the rows profiled, "per_node" (kernel_costs), "total" per predict call and "outside_kernels" (C code
    between the kernels: loops of the run function, argmax); else {"unavailable": why}."""
    if not backend.supports("profile"):
        return {"unavailable": f"target {backend.name} has no per-function profile"}
    try:
        prof = backend.profile(out_dir, output, np.asarray(X)[:PROFILE_ROWS])
    except ToolchainError as exc:
        return {"unavailable": str(exc).splitlines()[0]}
    unit = SIMULATORS.load(backend.simulator).unit if getattr(backend, "simulator", None) else "cycles"
    per_node = kernel_costs(output.node_functions, output.kernels, prof, output.prefix, unit,
                            output.node_steps)
    total = sum(prof.values())
    inside = sum(r[f"measured_{unit}"] or 0 for r in per_node)
    return {"unit": unit, "rows": int(min(len(X), PROFILE_ROWS)), "total": round(total, 1),
            "outside_kernels": round(total - inside, 1), "per_node": per_node}


CYCLE_ROWS = 4  # rows priced by the cycle model (a Python hook per executed instruction: seconds per million)


def measure_cycles(backend, out_dir, output, X, wait_states: int = 0) -> dict:
    """target_report's "cycle_model" entry: cycles per inference from the target's cycle model on the first
    CYCLE_ROWS rows ("mean", "max", "rows", "instructions_mean" of those rows, "wait_states", "per_function"),
    or {"unavailable": why}."""
    if not callable(getattr(backend, "model_cycles", None)):
        return {"unavailable": f"target {backend.name} has no cycle model"}
    try:
        count = backend.model_cycles(out_dir, output, np.asarray(X)[:CYCLE_ROWS], wait_states)
    except ToolchainError as exc:
        return {"unavailable": str(exc).splitlines()[0]}
    return {"mean": float(np.mean(count.cycles)), "max": int(np.max(count.cycles)), "rows": int(len(count.cycles)),
            "instructions_mean": float(np.mean(count.instructions)), "wait_states": int(wait_states),
            "per_function": {k: round(v, 1) for k, v in sorted(count.per_function.items(), key=lambda kv: -kv[1])}}

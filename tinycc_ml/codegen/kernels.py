"""Hand-written kernels: how a target replaces the shared C of an op with code of its own.

A target lists its kernels in ``CTarget.kernels``; for every node the emitter asks the kernels registered
for the node's op and precision, in the target's order, and the first that emits lines wins (a kernel may
still decline then, by returning None: the next one is asked, and after the last the shared C runs).
Kernels that state a cost are tried before those that do not, cheapest first, and the choice with every
claimant's predicted cost goes to the build's kernel report (``BuildOutput.kernels``).

What a kernel may do with the emitter (``CEmitter``), besides reading ``em.graph``:

- ``em.var(name)``: the C name of a value; ``em.sym(text)``: a symbol carrying the model's prefix;
- ``em.add_const_array(name, values, ctype, comment)``: a constant array in flash (equal arrays are stored
  once), and ``em.kernel_layout[value] = layout`` when it re-lays out a constant that streaming reads back
  (``BlockedLayout``, ``SplitLayout``, ``InterleavedBounds``);
- ``em.helpers[name] = text``: a function or asm block emitted once before the run function;
- ``em.scratch(name, ctype, count)``: static scratch memory, counted in the build's RAM;
- ``em.kernel_report.append(dict)``: what it chose and why (``KernelChoice.as_dict``).

Everything it computes must equal the op's semantics in the registry (``node_output_shift`` gives the
accumulator's shift); ``tinycc_ml.testing.check_target`` proves it bit for bit against the interpreters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tinycc_ml.ir.graph import Node

if TYPE_CHECKING:
    from tinycc_ml.codegen.emitter import CEmitter

PRECISIONS = ("fixed", "float", "on_read")


@dataclass(frozen=True)
class KernelCost:
    """One way to run a node as a cost model sees it: predicted cycles (or instructions) and flash bytes of
    the kernel's code and constants, or why it cannot run the node."""

    cycles: int | None = None
    flash: int | None = None
    unavailable: str | None = None

    @property
    def usable(self) -> bool:
        return self.unavailable is None

    def as_dict(self) -> dict:
        return {"unavailable": self.unavailable} if self.unavailable else {"cycles": self.cycles, "flash": self.flash}


KernelCode = Callable[["CEmitter", Node], "list[str] | None"]


@dataclass(frozen=True)
class Kernel:
    """A hand-written kernel for one op at one precision.

    op: the registry's op name (``"matvec"``, ``"sqdist"``, ...).
    emit(em, node): the node's C lines (calls, loops, inline asm; helpers and constants through ``em``), or
        None to decline.
    precision: ``"fixed"`` (integer builds), ``"float"``, or ``"on_read"`` (a node reading the input clamp
        applied on read, through ``em.clamp_function()``).
    claims(em, node): whether the kernel takes this node (operand types, shapes, constants); None: every
        node of its op and precision (emit may still decline).
    cost(em, node): its ``KernelCost`` for this node; kernels with a cost are tried cheapest first.
    name: shown in the kernel report (default: emit's name).
    """

    op: str
    emit: KernelCode
    precision: str = "fixed"
    claims: Callable[[CEmitter, Node], bool] | None = None
    cost: Callable[[CEmitter, Node], KernelCost] | None = None
    name: str = ""

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise ValueError(f"kernel {self.label}: precision {self.precision!r} is not one of {PRECISIONS}")
        if not callable(self.emit):
            raise TypeError(f"kernel {self.label}: emit must be callable")

    @property
    def label(self) -> str:
        return self.name or getattr(self.emit, "__name__", "kernel")


def choose_kernel(costs: dict[str, KernelCost], stored: str) -> str:
    """The fastest candidate whose flash is at most the larger of the stored form's (``stored``: the size the
    model was trained to) and any dense kernel's image (names ending in ``dense-asm``: what the same matrix
    costs stored dense): a sparse matrix may run dense where that is faster, never bigger than a dense one."""
    dense = [v.flash for k, v in costs.items() if k.endswith("dense-asm") and v.usable]
    limit = max([costs[stored].flash, *dense])
    ok = [k for k, v in costs.items() if v.usable and v.flash <= limit]
    return min(ok, key=lambda k: costs[k].cycles)

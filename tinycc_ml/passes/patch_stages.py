"""Patch-based execution of a network's early stages (MCUNetV2): the layers from the input up to a split layer
computed patch by patch, over a grid of tiles of the split layer's output, so that their large activations never
exist whole; only the split layer's output does, each patch's tile written into it (``tile_insert``).

The stage is the chain of windowed layers (conv2d, depthwise_conv2d, average / max pool) the input feeds, each
the only user of the one before. A tile of a layer's output needs a box of its input (the windows' rows and
columns, clipped to the input): going back from the split layer's tile gives every layer's box, and the input's
is cropped (``strided_slice``). The overlapping boxes of neighbouring patches (the halo) are computed once per
patch: exact, for each output element is its window's taps as before. Each patch layer keeps the original's
padding where its box meets the image's border and none inside it: explicit ``pads`` [top, left, bottom, right]
(a tap the original skips, outside the input, is skipped; a tap it reads is inside the box). So every patch
layer is an ordinary layer of the same op, computed by the target's own kernels.

The choice (``ram_limit``, bytes of the activation arena): among the splits and grids up to ``MAX_GRID`` x
``MAX_GRID``, the one with the fewest extra multiply-accumulates whose planned arena fits; none: refused with the
smallest arena found. The result is recorded in ``graph.analyses.patches``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tinycc_ml.errors import DataError, FitError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops.registry import node_macs
from tinycc_ml.ir.ops.windows import axis_geometry
from tinycc_ml.ir.types import TensorType
from tinycc_ml.passes.manager import Pass, PassContext, register_pass
from tinycc_ml.passes.plan_memory import element_bytes, fused_chains, lower_bound, plan

MAX_GRID = 6  # tiles per axis tried: more adds halo and code for little RAM
WINDOW_OPS = ("conv2d", "depthwise_conv2d", "average_pool2d", "max_pool2d")


@dataclass(frozen=True)
class AxisWindow:
    """One axis of a layer's window: input size, window, stride, dilation, padding before, output size."""

    size: int
    window: int
    stride: int
    dilation: int
    before: int
    out: int

    def needs(self, lo: int, hi: int) -> tuple[int, int, int, int]:
        """Output rows [lo, hi) read input rows [first, last) and take ``pad_before`` / ``pad_after`` rows of the
        original padding (the rows outside the input their windows reach): (first, last, pad_before, pad_after)."""
        start = lo * self.stride - self.before
        end = (hi - 1) * self.stride - self.before + (self.window - 1) * self.dilation + 1
        first, last = max(0, start), min(self.size, end)
        return first, last, first - start, end - last


@dataclass(frozen=True)
class Layer:
    name: str
    axes: tuple[AxisWindow, AxisWindow]  # height, width


@dataclass(frozen=True)
class Patching:
    """A split (the last stage layer computed by patches) and grid, with what they cost and save."""

    split: str
    grid: tuple[int, int]
    arena_bytes: int
    unpatched_bytes: int
    macs: int
    extra_macs: int

    def as_report(self) -> dict:
        return {"split": self.split, "grid": list(self.grid), "arena_bytes": self.arena_bytes,
                "unpatched_arena_bytes": self.unpatched_bytes, "macs": self.macs, "extra_macs": self.extra_macs,
                "extra_macs_percent": round(100 * self.extra_macs / max(1, self.macs - self.extra_macs), 2)}

    def describe(self) -> str:
        report = self.as_report()
        return (f"patch-based execution: the layers up to %{self.split} in {self.grid[0]}x{self.grid[1]} patches: "
                f"arena {self.arena_bytes:,} B (whole layers: {self.unpatched_bytes:,} B), "
                f"{self.extra_macs:,} more MACs (+{report['extra_macs_percent']}%)")


def window_of_layer(graph: Graph, name: str) -> tuple[int, int]:
    node = graph.node(name)
    if node.op in ("conv2d", "depthwise_conv2d"):
        return tuple(int(k) for k in graph.type(node.inputs[1]).shape[1:3])
    return tuple(int(k) for k in node.attrs["filter"])


def stage(graph: Graph) -> tuple[str | None, list[Layer]]:
    """The image the stage reads (the input, or a reshape of it; None without one) and its chain of windowed
    layers, each with its geometry."""
    inputs = graph.inputs()
    image = None
    if len(inputs) == 1:
        x = inputs[0]
        users = graph.users(x)
        if graph.type(x).rank == 4:
            image = x
        elif len(users) == 1 and graph.op(users[0]) == "reshape" and graph.type(users[0]).rank == 4:
            image = users[0]
    if image is None:
        return None, []
    outputs = {n for _, n in graph.outputs}
    layers, cur = [], image
    while cur not in outputs and len(graph.users(cur)) == 1:
        node = graph.node(graph.users(cur)[0])
        if (node.op not in WINDOW_OPS or node.inputs[0] != cur or node.inputs.count(cur) != 1
                or any(graph.op(i) != "const" for i in node.inputs[1:]) or node.type.rank != 4
                or not node.type.dtype.is_quantised or node.type.shape[0] != 1):
            break
        window = window_of_layer(graph, node.name)
        x = graph.type(cur)
        stride = [int(s) for s in node.attrs.get("stride", [1, 1])]
        dilation = [int(d) for d in node.attrs.get("dilation", [1, 1])]
        axes = []
        for a in range(2):
            out, before = axis_geometry(x.shape[1 + a], window[a], stride[a], dilation[a], node.attrs, a)
            axes.append(AxisWindow(x.shape[1 + a], window[a], stride[a], dilation[a], before, out))
        layers.append(Layer(node.name, tuple(axes)))
        cur = node.name
    return image, layers


def tile_ranges(size: int, parts: int) -> list[tuple[int, int]]:
    """[0, size) in ``parts`` contiguous ranges, the larger ones first."""
    return [(size * i // parts, size * (i + 1) // parts) for i in range(parts)]


def boxes(layers: list[Layer], axis: int, lo: int, hi: int) -> list[tuple[int, int, int, int, int, int]]:
    """Per layer (first to last), for the last layer's output rows [lo, hi) on ``axis``: (out lo, out hi, in first,
    in last, pad before, pad after)."""
    result = []
    for layer in reversed(layers):
        first, last, before, after = layer.axes[axis].needs(lo, hi)
        result.append((lo, hi, first, last, before, after))
        lo, hi = first, last
    return result[::-1]


def extra_macs(graph: Graph, layers: list[Layer], grid: tuple[int, int]) -> int:
    """The multiply-accumulates the patches compute twice (a layer's MACs are its output positions' windows)."""
    total = 0
    for i, layer in enumerate(layers):
        areas = [[b[i][1] - b[i][0] for b in (boxes(layers, a, lo, hi) for lo, hi in tile_ranges(
            layers[-1].axes[a].out, grid[a]))] for a in range(2)]
        positions = sum(areas[0]) * sum(areas[1])
        whole = layer.axes[0].out * layer.axes[1].out
        total += node_macs(graph, layer.name) * (positions - whole) // whole
    return total


def patched(graph: Graph, image: str, layers: list[Layer], grid: tuple[int, int]) -> Graph:
    """``graph`` with ``layers`` computed in ``grid`` patches of the last one's output."""
    g = graph.copy()
    split = g.type(layers[-1].name)
    whole = None
    for ty, (y_lo, y_hi) in enumerate(tile_ranges(split.shape[1], grid[0])):
        for tx, (x_lo, x_hi) in enumerate(tile_ranges(split.shape[2], grid[1])):
            rows, cols = boxes(layers, 0, y_lo, y_hi), boxes(layers, 1, x_lo, x_hi)
            x = g.type(image)
            count = [x.shape[0], rows[0][3] - rows[0][2], cols[0][3] - cols[0][2], x.shape[3]]
            cur = g.add("strided_slice", [image], {"begin": [0, rows[0][2], cols[0][2], 0], "stride": [1, 1, 1, 1],
                                                   "count": count, "shape": count},
                        type=TensorType(tuple(count), x.dtype, x.layout), name=f"{image}_p{ty}_{tx}")
            for layer, row, col in zip(layers, rows, cols):
                node = g.node(layer.name)
                attrs = {**node.attrs, "padding": "explicit", "pads": [row[4], col[4], row[5], col[5]]}
                shape = (node.type.shape[0], row[1] - row[0], col[1] - col[0], node.type.shape[3])
                cur = g.add(node.op, [cur, *node.inputs[1:]], attrs, TensorType(shape, node.type.dtype,
                                                                                  node.type.layout),
                            name=f"{layer.name}_p{ty}_{tx}")
            whole = g.add("tile_insert", [cur] + ([whole] if whole else []),
                          {"at": [y_lo, x_lo], "shape": list(split.shape)}, name=f"{layers[-1].name}_tiles")
    g.replace_uses(layers[-1].name, whole)
    for layer in reversed(layers):
        g.remove(layer.name)
    return g


def arena_bytes_of(arenas: dict[str, int]) -> int:
    return sum(n * element_bytes(key) for key, n in arenas.items())


def candidates(graph: Graph, layers: list[Layer]) -> list[tuple[int, int, int, tuple[int, int]]]:
    """Every split and grid of more than one patch: (extra MACs, patches, last layer's index, grid), fewest extra
    MACs first."""
    found = []
    for end in range(len(layers)):
        out = layers[end].axes
        for gy in range(1, min(MAX_GRID, out[0].out) + 1):
            for gx in range(1, min(MAX_GRID, out[1].out) + 1):
                if gy * gx > 1:
                    found.append((extra_macs(graph, layers[:end + 1], (gy, gx)), gy * gx, end, (gy, gx)))
    return sorted(found)


def smallest_arena(graph: Graph, max_extra_macs: int) -> int:
    """The smallest planned arena (bytes) of the whole layers and of every split and grid costing at most
    ``max_extra_macs`` more MACs (a split whose largest live set reaches the best found is not planned)."""
    best = arena_bytes_of(plan(graph, fused_chains(graph))[1])
    image, layers = stage(graph)
    for extra, _, end, grid in candidates(graph, layers):
        if extra > max_extra_macs:
            break
        g = patched(graph, image, layers[:end + 1], grid)
        fused = fused_chains(g)
        if arena_bytes_of(lower_bound(g, fused)) < best:
            best = min(best, arena_bytes_of(plan(g, fused)[1]))
    return best


def choose(graph: Graph, ram_limit: int) -> tuple[Graph, Patching | None]:
    """The graph as built for ``ram_limit`` bytes of activation arena: unchanged when it fits, else patched by the
    split and grid with the fewest extra MACs that fit (FitError when none does)."""
    unpatched = arena_bytes_of(plan(graph, fused_chains(graph))[1])
    if unpatched <= ram_limit:
        return graph, None
    image, layers = stage(graph)
    macs = sum(node_macs(graph, n) for n in graph.order())
    best: tuple[int, str, tuple[int, int], str] | None = None  # the least bytes found: (bytes, split, grid, what)
    for extra, _, end, grid in candidates(graph, layers):
        g = patched(graph, image, layers[:end + 1], grid)
        fused = fused_chains(g)
        bound = arena_bytes_of(lower_bound(g, fused))
        if bound > ram_limit:
            if best is None or bound < best[0]:
                best = (bound, layers[end].name, grid, "its largest live set")
            continue
        arenas = arena_bytes_of(plan(g, fused)[1])
        if arenas <= ram_limit:
            return g, Patching(layers[end].name, grid, arenas, unpatched, macs + extra, extra)
        if best is None or arenas < best[0]:
            best = (arenas, layers[end].name, grid, "its planned arena")
    closest = (f"; the least found: {best[0]:,} B ({best[3]} with the layers up to %{best[1]} in "
               f"{best[2][0]}x{best[2][1]} patches)" if best else "")
    tried = (f"no split of its first {len(layers)} windowed layers in up to {MAX_GRID}x{MAX_GRID} patches fits"
             if layers else "it has no chain of windowed layers from its input to compute by patches")
    raise FitError(f"ram_limit {ram_limit:,} B: the activation arena takes {unpatched:,} B and {tried}{closest}")


@register_pass
class PatchStages(Pass):
    name = "patch_stages"
    description = "compute a network's early layers patch by patch to fit the activation arena in ram_limit"

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        limit = ctx.options.ram_limit
        if limit is None:
            return graph
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise DataError(f"ram_limit is {limit!r}, but it must be a positive number of bytes")
        graph, patching = choose(graph, limit)
        graph.analyses.patches = patching.as_report() if patching else None
        ctx.log.append(f"patch_stages: {patching.describe() if patching else 'the whole layers fit'}")
        return graph

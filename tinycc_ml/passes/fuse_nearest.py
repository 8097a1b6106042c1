"""Fuse the distances and the k-nearest vote, so no build keeps a distance per reference point.

    d = sqdist(x, M);  scores = kvote(d)      (M: constant, d read by the vote alone)
 ->
    scores = sqdist_kvote(x, M)

sqdist_kvote computes the distances one prototype at a time and inserts each into the k best
(O(k) memory: kNN's working RAM no longer grows with the training set). In fixed-point graphs the
pass runs after scale choice and copies the distance's chosen type (``dist_bits``, ``dist_scale``)
and difference shift into the fused node: the votes are bit for bit those of the two ops.
"""

from __future__ import annotations

from tinycc_ml.ir.graph import Graph
from tinycc_ml.passes.manager import Pass, PassContext, register_pass


@register_pass
class FuseNearest(Pass):
    name = "fuse_nearest"
    description = "kvote(sqdist(x, M)) -> sqdist_kvote: the k best kept while scanning (O(k) distance memory)"

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        outputs = {n for _, n in graph.outputs}
        for name in list(graph.order()):
            node = graph.node(name)
            if node.op != "kvote":
                continue
            (d,) = node.inputs
            dist = graph.node(d)
            if (dist.op != "sqdist" or d in outputs or graph.users(d) != [name]
                    or graph.op(dist.inputs[1]) != "const"):
                continue
            attrs = {key: node.attrs[key] for key in ("k", "n_classes", "labels")}
            if "shift" in dist.attrs:
                attrs["shift"] = int(dist.attrs["shift"])
            if dist.type.dtype.is_fixed:
                attrs["dist_bits"], attrs["dist_scale"] = dist.type.dtype.bits, dist.type.dtype.scale
            fused = graph.add("sqdist_kvote", dist.inputs, attrs, type=node.type, name=f"{name}_fused")
            graph.replace_uses(name, fused)
            graph.remove(name)
            graph.remove(d)
            a = graph.analyses
            if d in a.safety:
                a.safety[fused] = a.safety.pop(d)
            a.ranges.pop(d, None)
            if name in a.ranges:
                a.ranges[fused] = a.ranges.pop(name)
            a.safety.pop(name, None)
            ctx.log.append(f"fuse_nearest: %{d} -> %{name} as %{fused} (the k best kept while scanning)")
        return graph

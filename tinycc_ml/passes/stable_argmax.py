"""Predict from similarities that cannot all underflow (float builds).

    scores = matvec(Z, exp(e));  prediction = argmax(scores)
 ->
    top = max(e);  rel = matvec(Z, exp(e - top))
    scores = rel * exp(top);     prediction = argmax(rel)

exp(top) > 0 scales every score alike, so argmax(rel) is the argmax of the scores; but where
every exp(e) underflows in float32 (ProtoNN inputs far from all prototypes) the scores are all 0
and their argmax is class 0, while rel still holds the best term exp(0) = 1 and ranks the classes
as the model does. The scores keep their meaning (they still underflow when the true ones do).
"""

from __future__ import annotations

from tinycc_ml.ir.graph import Graph
from tinycc_ml.passes.manager import Pass, PassContext, register_pass


@register_pass
class StableArgmax(Pass):
    name = "stable_argmax"
    description = "rank matvec(Z, exp(e)) scores by exp(e - max e), immune to underflow"

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        for label, prediction in list(graph.outputs):
            if graph.op(prediction) != "argmax":
                continue
            (scores,) = graph.node(prediction).inputs
            if graph.op(scores) != "matvec" or not graph.type(scores).dtype.is_float:
                continue
            matrix, similarity = graph.node(scores).inputs
            if graph.op(similarity) != "exp" or graph.type(similarity).rank != 1:
                continue
            (exponent,) = graph.node(similarity).inputs
            top = graph.add("max", [exponent], name=f"{exponent}_top")
            shifted = graph.add("sub", [exponent, top], name=f"{exponent}_shifted")
            relative = graph.add("matvec", [matrix, graph.add("exp", [shifted], name=f"{similarity}_relative")],
                                 name=f"{scores}_relative")
            rescaled = graph.add("mul", [relative, graph.add("exp", [top], name=f"{similarity}_top")],
                                 name=f"{scores}_rescaled")
            graph.replace_uses(scores, rescaled)
            stable = graph.add("argmax", [relative], name=f"{prediction}_stable")
            graph.outputs = [(lab, stable if lab == label else node) for lab, node in graph.outputs]
            ctx.log.append(f"stable_argmax: %{label} ranks %{scores} by exp(%{exponent} - max)")
        return graph

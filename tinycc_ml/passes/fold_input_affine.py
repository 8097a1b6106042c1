"""Fold input normalisation into the projection.

    matvec(W, mul(sub(x, mean), inv_std))  ->  sub(matvec(W', x), c)   W' = W diag(inv_std), c = W' mean
    sqdist(sub(p, c), B)                   ->  sqdist(p, B + c)

so the device never computes (x - mean) / std: that costs D subtractions and D multiplies per
inference, while the folded form costs nothing (and c disappears into the prototypes).
W may be dense or sparse; a sparse W keeps its pattern.

With the option ``fold_mean=False`` only the multiplication is folded (matvec(W', sub(x, mean))):
float32 code then keeps the D subtractions, because W'x - c subtracts two large numbers and
loses digits when |mean| >> std. Integer code folds everything (its arithmetic is exact).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops import OPS, sparse_to_dense
from tinycc_ml.passes.manager import Pass, PassContext, register_pass


def _const_value(graph: Graph, name: str) -> np.ndarray | None:
    if graph.op(name) == "const":
        return graph.node(name).attrs["value"].astype(np.float64)
    return None


@register_pass
class FoldInputAffine(Pass):
    name = "fold_input_affine"
    description = "fold (x - mean) * inv_std into the following projection and distances"

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        for name in graph.order():
            if name not in graph or graph.op(name) != "matvec" or not graph.type(name).dtype.is_float:
                continue
            w_name, v_name = graph.node(name).inputs
            if graph.op(w_name) not in ("const", "sparse_const") or graph.op(v_name) != "mul":
                continue
            d_name, s_name = graph.node(v_name).inputs
            inv_std = _const_value(graph, s_name)
            if inv_std is None or graph.op(d_name) != "sub":
                continue
            x_name, m_name = graph.node(d_name).inputs
            mean = _const_value(graph, m_name)
            if mean is None:
                continue
            w_node = graph.node(w_name)
            dense = OPS[w_node.op].evaluate([], w_node.attrs)
            folded = dense * np.broadcast_to(inv_std, (dense.shape[1],))[None, :]
            offset = (folded @ np.broadcast_to(mean, (dense.shape[1],))).astype(np.float32)
            if w_node.op == "sparse_const":
                # keep the stored pattern; values in CSC order (column by column, rows ascending)
                mask = sparse_to_dense({**w_node.attrs, "values": np.ones_like(w_node.attrs["values"])}) != 0
                attrs = {**w_node.attrs, "values": folded.T[mask.T].astype(np.float32)}
                new_w = graph.add("sparse_const", attrs=attrs, type=w_node.type, name=f"{w_name}_folded")
            else:
                new_w = graph.add("const", attrs={"value": folded.astype(np.float32)}, name=f"{w_name}_folded")
            if not ctx.options.fold_mean:
                graph.replace_uses(name, graph.add("matvec", [new_w, d_name], name=f"{name}_scaled"))
                ctx.log.append(f"fold_input_affine: folded 1/std into %{w_name}")
                continue
            projected = graph.add("matvec", [new_w, x_name], name=f"{name}_raw")
            c = graph.add("const", attrs={"value": offset}, name=f"{name}_offset")
            shifted = graph.add("sub", [projected, c], name=f"{name}_shifted")
            graph.replace_uses(name, shifted)
            self._into_distances(graph, shifted, projected, offset)
            ctx.log.append(f"fold_input_affine: folded normalisation into %{w_name}")
        return graph

    @staticmethod
    def _into_distances(graph: Graph, shifted: str, projected: str, offset: np.ndarray) -> None:
        for user in graph.users(shifted):
            node = graph.node(user)
            if node.op != "sqdist" or node.inputs[0] != shifted:
                continue
            prototypes = _const_value(graph, node.inputs[1])
            if prototypes is None:
                continue
            moved = graph.add("const", attrs={"value": (prototypes + offset[:, None]).astype(np.float32)},
                              name=f"{node.inputs[1]}_shifted")
            dist = graph.add("sqdist", [projected, moved], name=f"{user}_folded")
            graph.replace_uses(user, dist)

"""A graph step in the user's words (a layer, the trees, the distances), for what users read: the header's
remarks and the report's kernel profile. IR value names (``%weighted0``) and op names mean nothing to them."""

from __future__ import annotations

# a model's first step in words, where streaming is refused for it (other ops go by their name)
FIRST_STEP_WORDS = {"reshape": "a reshape of the input", "conv2d": "a 2-D convolution",
                    "conv1d": "a 1-D convolution", "depthwise_conv2d": "a depthwise convolution",
                    "matvec": "a product by a computed matrix", "sqdist": "distances to computed points",
                    "sub": "a subtraction", "mul": "a multiplication", "add": "an addition",
                    "quantize": "a quantisation of the input", "cast": "a type conversion"}

# ops whose name is not already a word a user knows
NOUNS = {"matvec_at": "tree node products", "sqdist_kvote": "distances to the stored rows and the vote",
         "wsqdist": "weighted distances to each class", "exp_lut": "exponentials (table)",
         "tanh_lut": "tanh (table)", "tanh_clamp": "tanh (clamped)", "kvote": "votes of the nearest rows",
         "segment_min": "nearest prototype per class", "conv2d": "2-D convolution",
         "depthwise_conv2d": "depthwise convolution", "grouped_conv2d": "grouped convolution",
         "transpose_conv2d": "transposed convolution", "average_pool2d": "average pooling",
         "max_pool2d": "max pooling", "fully_connected": "fully connected layer", "tensor_add": "addition",
         "tensor_sub": "subtraction", "tensor_mul": "multiplication", "ovo_votes": "one-vs-one votes",
         "ovr_decision": "one-vs-rest decision", "argmax": "the largest score", "requantize": "requantisation"}


def step_words(graph, node) -> str:
    """``node`` of ``graph`` in words, with the size that tells it apart from its neighbours: "matrix
    product, 64 inputs -> 16 outputs", "10 trees", "distances to 50 points"."""
    if node.op in ("matvec", "fully_connected") and len(node.inputs) >= 2:
        shape = graph.type(node.inputs[0] if node.op == "matvec" else node.inputs[1]).shape
        if len(shape) == 2:
            name = "matrix product" if node.op == "matvec" else "fully connected layer"
            return f"{name}, {shape[1]:,} inputs -> {shape[0]:,} outputs"
    if node.op == "tree_ensemble":
        trees = len(node.attrs["roots"])
        return f"{trees} tree{'s' if trees != 1 else ''}"
    if node.op in ("sqdist", "sqdist_kvote") and len(node.inputs) >= 2:
        shape = graph.type(node.inputs[1]).shape
        if len(shape) == 2:
            return f"distances to {shape[1]:,} points" + (" and the vote" if node.op == "sqdist_kvote" else "")
    if node.op == "clip":
        return "input clamp" if graph.op(node.inputs[0]) == "input" else "clamp"
    return NOUNS.get(node.op, node.op.replace("_", " "))

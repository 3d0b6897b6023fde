"""Groups of MIL op types, each defined once: passes, the placement rules, the
simulator, its cliff checks and the exporters ask these instead of keeping their own
sets. No other module spells out a set of op names (a test scans the sources); an op's
record lists the groups it is in (:attr:`anekit.ops.registry.OpDef.groups`)."""

from __future__ import annotations

#: Ops that multiply-accumulate over an input axis (conv, matmul and kin): the ANE's
#: layer ops, accumulated in fp32 and rounded once in the simulator.
MATMUL_LIKE = frozenset({"matmul", "linear", "conv", "conv_transpose", "einsum"})

#: Elementwise ops with two broadcasting operands ``x`` and ``y``.
BINARY_ELEMENTWISE = frozenset(
    {"add", "sub", "mul", "real_div", "maximum", "minimum", "pow", "floor_div", "mod",
     "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
     "logical_and", "logical_or", "logical_xor"}
)  # fmt: skip

#: The four arithmetic binaries (what may sit between an attention score matmul and
#: its softmax, and what a mask or a scale passes through).
ARITHMETIC = frozenset({"add", "sub", "mul", "real_div"})

#: Float binaries that keep a (B, C, 1, S) layout when both sides have it.
FLOAT_BINARY = ARITHMETIC | {"maximum", "minimum", "pow"}

#: Float unaries applied value by value (shape and layout kept).
UNARY_ELEMENTWISE = frozenset(
    {"relu", "gelu", "silu", "sigmoid", "tanh", "exp", "sqrt", "rsqrt", "abs", "erf", "clip",
     "square", "inverse", "log", "floor", "ceil", "round", "sign", "elu", "leaky_relu",
     "softplus", "identity", "cast"}
)  # fmt: skip

#: Reductions the layout passes carry through (axes remapped).
LAYOUT_REDUCTIONS = frozenset(
    {"reduce_mean", "reduce_sum", "reduce_max", "reduce_min", "reduce_l2_norm"}
)

#: Ops that only change a tensor's shape or axis order.
LAYOUT = frozenset({"reshape", "transpose", "expand_dims", "squeeze"})

#: Ops whose output holds exactly their input's values, rearranged.
PERMUTES = LAYOUT | {"identity"}

#: Ops whose float outputs are some of their float inputs' values, moved or selected:
#: a value already stored as fp16 is not rounded again (the rounding list of the
#: interpreter and of the compiled engine).
VALUE_PRESERVING = PERMUTES | frozenset(
    {"slice_by_index", "slice_by_size", "concat", "stack", "split", "tile", "reverse",
     "gather", "gather_along_axis", "gather_nd", "select", "reduce_max", "reduce_min",
     "maximum", "minimum", "abs", "relu", "flatten2d", "depth_to_space", "space_to_depth",
     "pixel_shuffle", "pixel_unshuffle", "sliding_windows", "reverse_sequence", "slice_update",
     "space_to_batch", "batch_to_space"}
)  # fmt: skip

#: Layer ops whose weight operand the placement rules trace back through its constexpr
#: decompression (einsum's operands are activations).
WEIGHTED_LAYERS = MATMUL_LIKE - {"einsum"}

#: Ops whose constant inputs weight compression compresses (coremltools compresses the
#: constants they read): the layer ops and gather (embedding tables).
WEIGHT_READERS = MATMUL_LIKE | {"gather"}

#: Ops a linear layer may be written as outside the ANE layout (the to_bc1s pass
#: rewrites them as 1x1 convolutions).
LINEAR_LAYERS = frozenset({"linear", "matmul"})

#: Layer ops that a query's projection (constant weight and bias) may be.
PROJECTIONS = frozenset({"linear", "conv"})

#: Ops that make attention scores from queries and keys (what feeds a softmax).
SCORE_PRODUCERS = frozenset({"matmul", "einsum"})

#: Ops that carry scores from their producer to a softmax (a scale, a mask, a cast).
SCORE_PATH = ARITHMETIC | {"cast", "identity", "reshape"}

#: Ops through which a function input stays "a mask given at run time".
MASK_CARRIERS = LAYOUT | {"cast", "identity"}

#: Ops through which a constant stays part of an additive mask on its way to a softmax.
MASK_PATH = MASK_CARRIERS | {"add", "sub", "mul", "select", "tile", "fill", "minimum", "maximum"}

#: Reductions that square their input themselves (sum of squares, its root).
SQUARING_REDUCTIONS = frozenset({"reduce_sum_square", "reduce_l2_norm"})

#: Reductions whose input may be the squares of the values a root normalizes
#: (mean or sum of v*v, or of v by itself).
SUMS_OF_SQUARES = frozenset({"reduce_mean", "reduce_sum", "reduce_sum_square"})

#: Square roots of a sum of squares (a norm's denominator).
ROOTS = frozenset({"sqrt", "rsqrt", "reduce_l2_norm"})

#: Binaries that scale by a constant (a mean's 1/n, written as mul or real_div).
SCALINGS = frozenset({"mul", "real_div"})

#: Compile-time (constexpr) weight ops; coremltools defines how each decompresses.
CONSTEXPR = frozenset(
    {"constexpr_affine_dequantize", "constexpr_cast", "constexpr_lut_to_dense",
     "constexpr_sparse_to_dense", "constexpr_blockwise_shift_scale",
     "constexpr_lut_to_sparse", "constexpr_sparse_blockwise_shift_scale"}
)  # fmt: skip

#: Constexpr ops that decompress linearly quantized (integer) weights.
LINEAR_QUANTIZED = frozenset(
    {"constexpr_affine_dequantize", "constexpr_blockwise_shift_scale",
     "constexpr_sparse_blockwise_shift_scale"}
)  # fmt: skip

#: Ops whose value does not depend on the program's inputs.
CONSTANT = frozenset({"const"}) | CONSTEXPR

#: Ops that read or write model state.
STATE = frozenset({"read_state", "coreml_update_state", "slice_update"})

#: Control flow and the list ops that go with it.
CONTROL_FLOW = frozenset(
    {"cond", "while_loop", "make_list", "list_length", "list_read", "list_write", "list_gather",
     "list_scatter"}
)  # fmt: skip

#: Shape plumbing: ops that make index or shape tensors rather than activations.
PLUMBING = frozenset({"shape", "range_1d", "fill", "fill_like"})

__all__ = [
    "ARITHMETIC",
    "BINARY_ELEMENTWISE",
    "CONSTANT",
    "CONSTEXPR",
    "CONTROL_FLOW",
    "FLOAT_BINARY",
    "LAYOUT",
    "LAYOUT_REDUCTIONS",
    "LINEAR_LAYERS",
    "LINEAR_QUANTIZED",
    "MASK_CARRIERS",
    "MASK_PATH",
    "MATMUL_LIKE",
    "PERMUTES",
    "PLUMBING",
    "PROJECTIONS",
    "ROOTS",
    "SCALINGS",
    "SCORE_PATH",
    "SCORE_PRODUCERS",
    "SQUARING_REDUCTIONS",
    "STATE",
    "SUMS_OF_SQUARES",
    "UNARY_ELEMENTWISE",
    "VALUE_PRESERVING",
    "WEIGHTED_LAYERS",
    "WEIGHT_READERS",
]

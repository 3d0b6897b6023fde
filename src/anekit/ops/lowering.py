"""MIL ops lowered to ONNX ops with the simulator's semantics, for the simulator's
compiled engine and the ONNX exporter.

Each lowering emits the ONNX ops that compute what the interpreter's implementation
of the same MIL op computes (:mod:`anekit.sim.ops`), including the fp16 round trips
of a composite's intermediates in ``ane`` mode. An op, or an op variant, without a
lowering raises :class:`NotLowerable`, and the program runs in the interpreter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from coremltools.converters.mil.mil.ops.defs._utils import solve_slice_by_index_slice

from anekit._milgraph import numpy_dtype, static_shape
from anekit.onnxgraph import Graph
from anekit.ops import composites
from anekit.ops.conv import conv_padding
from anekit.ops.numerics import Numerics
from anekit.ops.spaces import GraphSpace


class NotLowerable(Exception):
    """The function has an op (or an op variant) this module cannot lower."""


def onnx_type(dtype: np.dtype[Any]) -> int:
    from onnx import TensorProto

    if dtype.kind == "f":
        return int(TensorProto.FLOAT)
    table = {
        "int32": TensorProto.INT32,
        "int16": TensorProto.INT16,
        "int8": TensorProto.INT8,
        "uint8": TensorProto.UINT8,
        "uint16": TensorProto.UINT16,
        "bool": TensorProto.BOOL,
        "int64": TensorProto.INT64,
    }
    if dtype.name not in table:
        raise NotLowerable(f"dtype {dtype}")
    return int(table[dtype.name])


def shape_of(var: Any) -> tuple[int, ...]:
    shape = static_shape(var)
    if shape is None:
        raise NotLowerable(f"symbolic shape of {var.name}")
    return shape


@dataclass
class OpRecord:
    """Graph outputs that describe one op's result, for the report."""

    op: Any
    var: Any
    peak: str
    total: str
    probes: dict[str, str] = field(default_factory=dict)


class Lowering:
    """Builds the ONNX graph of one MIL function."""

    def __init__(self, func: Any, numerics: Numerics, opset: int = 17) -> None:
        self.func = func
        self.numerics = numerics
        self.graph = Graph("anekit_sim", opset)
        self.names: dict[int, str] = {}
        self.records: list[OpRecord] = []
        #: Extra graph outputs the current op's lowering asks for (its probes).
        self.probe: dict[str, str] = {}
        #: Stored constant values not yet added to the graph.
        self.pending: dict[int, tuple[Any, np.dtype[Any]]] = {}
        #: Per float result: its (max, sum, min) graph outputs.
        self.summaries: dict[int, tuple[str, str, str]] = {}
        #: The graph as an array space for the composites (stores as the run does).
        self.space = GraphSpace(self.graph, fp16=numerics.fp16)

    # -- values ---------------------------------------------------------------------

    def store(self, name: str) -> str:
        """An intermediate as the run's numerics store it."""
        return self.graph.rounded(name) if self.numerics.fp16 else name

    def value(self, var: Any) -> str:
        name = self.names.get(id(var))
        if name is None:
            # Constants become initializers when first used as tensors (weights that a
            # lowering reads at compile time, as linear does, are never added).
            value, dtype = self.pending[id(var)]
            name = self.graph.constant(value, dtype)
            self.names[id(var)] = name
        return name

    def const(self, var: Any) -> Any:
        """The compile-time value of a constant input (axes, modes, epsilons)."""
        if var is None:
            return None
        if var.op is None or var.op.op_type != "const":
            raise NotLowerable(f"input {var.name} must be a constant here")
        return var.val

    def constant(self, values: Any, dtype: Any = np.int64) -> str:
        return self.graph.constant(values, dtype)

    def scalar(self, value: Any) -> str:
        return self.graph.constant(np.float32(value), np.float32)

    def node(self, op_type: str, *inputs: str, **attributes: Any) -> str:
        return self.graph.node(op_type, *inputs, **attributes)

    def sum(self, value: str, shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> str:
        """``Numerics.sum`` over ``axes``: reduced axes moved last and flattened to rows."""
        rank = len(shape)
        kept = [axis for axis in range(rank) if axis not in axes]
        count = int(np.prod([shape[axis] for axis in axes], dtype=np.int64))
        moved = value
        if kept + list(axes) != list(range(rank)):
            moved = self.node("Transpose", value, perm=kept + list(axes))
        outer = [shape[axis] for axis in kept]
        # The kept axes stay axes (the exporter's models take any batch: axis 0 must
        # still be the batch); only the pairwise tree works on flattened rows.
        flat = self.node("Reshape", moved, self.constant([*outer, count]))
        if self.numerics.fp16 and self.numerics.accumulation == "fp16":
            rows = self.node("Reshape", flat, self.constant([-1, count]))
            total = composites.pairwise_sum(self.space, rows, count)
        else:
            total = self.store(self.space.sum(flat, (len(outer),)))
        target = [1 if axis in axes else shape[axis] for axis in range(rank)] if keepdims else outer
        return self.node("Reshape", total, self.constant(target))


Lower = Callable[[Lowering, Any], list[str]]
LOWERINGS: dict[str, Lower] = {}


def lowers(*op_types: str) -> Callable[[Lower], Lower]:
    def decorate(function: Lower) -> Lower:
        for op_type in op_types:
            LOWERINGS[op_type] = function
        return function

    return decorate


def _float_input(lower: Lowering, var: Any) -> str:
    dtype = numpy_dtype(var)
    if dtype is None or dtype.kind != "f":
        raise NotLowerable(f"{var.name} is not a float tensor")
    return lower.value(var)


# -- elementwise ---------------------------------------------------------------------

_BINARY = {
    "add": "Add", "sub": "Sub", "mul": "Mul", "real_div": "Div", "pow": "Pow",
    "maximum": "Max", "minimum": "Min", "equal": "Equal", "greater": "Greater",
    "greater_equal": "GreaterOrEqual", "less": "Less", "less_equal": "LessOrEqual",
    "logical_and": "And", "logical_or": "Or", "logical_xor": "Xor",
}  # fmt: skip


def _binary(onnx_op: str) -> Lower:
    def lower(low: Lowering, op: Any) -> list[str]:
        x, y = low.value(op.x), low.value(op.y)
        dtype = numpy_dtype(op.x)
        if onnx_op in ("Div", "Pow") and (dtype is None or dtype.kind != "f"):
            raise NotLowerable(f"{op.op_type} on {dtype}")
        return [low.node(onnx_op, x, y)]

    return lower


for _mil, _onnx in _BINARY.items():
    lowers(_mil)(_binary(_onnx))


@lowers("not_equal")
def _not_equal(low: Lowering, op: Any) -> list[str]:
    return [low.node("Not", low.node("Equal", low.value(op.x), low.value(op.y)))]


@lowers("floor_div", "mod")
def _floor_div_mod(low: Lowering, op: Any) -> list[str]:
    x, y = _float_input(low, op.x), _float_input(low, op.y)
    floor = low.node("Floor", low.node("Div", x, y))
    if op.op_type == "floor_div":
        return [floor]
    return [low.node("Sub", x, low.node("Mul", floor, y))]


_UNARY = {
    "abs": "Abs", "exp": "Exp", "sqrt": "Sqrt", "tanh": "Tanh", "sin": "Sin", "cos": "Cos",
    "tan": "Tan", "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh",
    "cosh": "Cosh", "atanh": "Atanh", "floor": "Floor", "ceil": "Ceil", "round": "Round",
    "sign": "Sign", "erf": "Erf", "relu": "Relu", "sigmoid": "Sigmoid",
    "logical_not": "Not", "identity": "Identity",
}  # fmt: skip


def _unary(onnx_op: str) -> Lower:
    def lower(low: Lowering, op: Any) -> list[str]:
        if onnx_op not in ("Not", "Identity", "Abs", "Sign"):
            _float_input(low, op.x)
        return [low.node(onnx_op, low.value(op.x))]

    return lower


for _mil, _onnx in _UNARY.items():
    lowers(_mil)(_unary(_onnx))


@lowers("square")
def _square(low: Lowering, op: Any) -> list[str]:
    x = _float_input(low, op.x)
    return [low.node("Mul", x, x)]


@lowers("exp2")
def _exp2(low: Lowering, op: Any) -> list[str]:
    return [low.node("Pow", low.scalar(2.0), _float_input(low, op.x))]


@lowers("log", "rsqrt", "inverse")
def _with_epsilon(low: Lowering, op: Any) -> list[str]:
    shifted = low.node("Add", _float_input(low, op.x), low.scalar(low.const(op.epsilon)))
    if op.op_type == "log":
        return [low.node("Log", shifted)]
    if op.op_type == "inverse":
        return [low.node("Reciprocal", shifted)]
    return [low.node("Reciprocal", low.node("Sqrt", shifted))]


@lowers("threshold")
def _threshold(low: Lowering, op: Any) -> list[str]:
    return [low.node("Max", _float_input(low, op.x), low.scalar(low.const(op.alpha)))]


@lowers("clip")
def _clip(low: Lowering, op: Any) -> list[str]:
    low_bound = low.node("Max", _float_input(low, op.x), low.scalar(low.const(op.alpha)))
    return [low.node("Min", low_bound, low.scalar(low.const(op.beta)))]


@lowers("cast")
def _cast(low: Lowering, op: Any) -> list[str]:
    from onnx import TensorProto

    target = str(low.const(op.dtype))
    source = numpy_dtype(op.x)
    if target == "bool":
        zero = low.constant(np.zeros((), source), source) if source is not None else None
        if zero is None:
            raise NotLowerable("cast from a non-tensor")
        return [low.node("Not", low.node("Equal", low.value(op.x), zero))]
    kinds = {"fp16": TensorProto.FLOAT, "fp32": TensorProto.FLOAT, "int32": TensorProto.INT32,
             "int16": TensorProto.INT16, "int8": TensorProto.INT8, "uint8": TensorProto.UINT8,
             "uint16": TensorProto.UINT16}  # fmt: skip
    if target not in kinds:
        raise NotLowerable(f"cast to {target}")
    return [low.node("Cast", low.value(op.x), to=kinds[target])]


@lowers("select")
def _select(low: Lowering, op: Any) -> list[str]:
    return [low.node("Where", low.value(op.cond), low.value(op.a), low.value(op.b))]


# -- activations ---------------------------------------------------------------------


@lowers("silu")
def _silu(low: Lowering, op: Any) -> list[str]:
    x = _float_input(low, op.x)
    return [low.node("Mul", x, low.node("Sigmoid", x))]


@lowers("gelu")
def _gelu(low: Lowering, op: Any) -> list[str]:
    mode = str(low.const(op.mode)) if op.mode is not None else "EXACT"
    if mode not in composites.GELU_MODES:
        raise NotLowerable(f"gelu mode {mode}")
    return [composites.gelu(low.space, _float_input(low, op.x), mode)]


@lowers("softmax")
def _softmax(low: Lowering, op: Any) -> list[str]:
    axis = int(low.const(op.axis)) % len(shape_of(op.x))
    return [composites.softmax(low.space, _float_input(low, op.x), axis)]


# -- reductions ----------------------------------------------------------------------


def _axes(low: Lowering, op: Any, rank: int) -> tuple[int, ...]:
    axes = low.const(op.axes) if op.axes is not None else None
    if axes is None:
        return tuple(range(rank))
    return tuple(sorted(int(axis) % rank for axis in np.atleast_1d(axes)))


def _keepdims(low: Lowering, op: Any) -> bool:
    return bool(low.const(op.keep_dims)) if op.keep_dims is not None else False


@lowers("reduce_sum", "reduce_mean", "reduce_sum_square", "reduce_l2_norm", "reduce_l1_norm")
def _reduce_sums(low: Lowering, op: Any) -> list[str]:
    x = _float_input(low, op.x)
    shape = shape_of(op.x)
    axes = _axes(low, op, len(shape))
    keep = _keepdims(low, op)
    if op.op_type in ("reduce_sum_square", "reduce_l2_norm"):
        x = low.store(low.node("Mul", x, x))
    elif op.op_type == "reduce_l1_norm":
        x = low.node("Abs", x)
    total = low.sum(x, shape, axes, keep)
    if op.op_type == "reduce_mean":
        count = int(np.prod([shape[axis] for axis in axes], dtype=np.int64))
        return [low.node("Div", low.store(total), low.scalar(count))]
    if op.op_type == "reduce_l2_norm":
        return [low.node("Sqrt", low.store(total))]
    return [total]


@lowers("reduce_max", "reduce_min", "reduce_prod")
def _reduce_other(low: Lowering, op: Any) -> list[str]:
    rank = len(shape_of(op.x))
    onnx_op = {"reduce_max": "ReduceMax", "reduce_min": "ReduceMin", "reduce_prod": "ReduceProd"}
    axes = _axes(low, op, rank)
    return [low.graph.reduce(onnx_op[op.op_type], low.value(op.x), axes, _keepdims(low, op))]


@lowers("reduce_argmax", "reduce_argmin")
def _argmax(low: Lowering, op: Any) -> list[str]:
    from onnx import TensorProto

    rank = len(shape_of(op.x))
    axis = int(low.const(op.axis)) % rank
    keep = int(_keepdims(low, op))
    onnx_op = "ArgMax" if op.op_type == "reduce_argmax" else "ArgMin"
    index = low.node(onnx_op, low.value(op.x), axis=axis, keepdims=keep)
    target = numpy_dtype(op.outputs[0])
    return [
        low.node("Cast", index, to=onnx_type(target) if target is not None else TensorProto.INT32)
    ]


# -- linear --------------------------------------------------------------------------


@lowers("matmul")
def _matmul(low: Lowering, op: Any) -> list[str]:
    x, y = _float_input(low, op.x), _float_input(low, op.y)
    if len(shape_of(op.x)) < 2 or len(shape_of(op.y)) < 2:
        raise NotLowerable("matmul of a rank-1 operand")
    for name, flag, var in (("x", op.transpose_x, op.x), ("y", op.transpose_y, op.y)):
        if flag is not None and bool(low.const(flag)):
            rank = len(shape_of(var))
            perm = [*range(rank - 2), rank - 1, rank - 2]
            if name == "x":
                x = low.node("Transpose", x, perm=perm)
            else:
                y = low.node("Transpose", y, perm=perm)
    return [low.node("MatMul", x, y)]


@lowers("linear")
def _linear(low: Lowering, op: Any) -> list[str]:
    x = _float_input(low, op.x)
    shape = shape_of(op.x)
    weight = low.numerics.store(low.const(op.weight), np.dtype(np.float32))
    inputs = [x, low.graph.constant(weight, np.float32)]
    if op.bias is not None:
        bias = low.numerics.store(low.const(op.bias), np.dtype(np.float32))
        inputs.append(low.graph.constant(bias, np.float32))
    if len(shape) != 2:
        # One GEMM over all leading axes, bias fused, as the interpreter does.
        inputs[0] = low.node("Reshape", x, low.constant([-1, shape[-1]]))
    product = low.node("Gemm", *inputs, transB=1)
    if len(shape) != 2:
        product = low.node("Reshape", product, low.constant(list(shape_of(op.outputs[0]))))
    return [product]


@lowers("conv")
def _conv(low: Lowering, op: Any) -> list[str]:
    x = _float_input(low, op.x)
    weight = low.numerics.store(low.const(op.weight), np.dtype(np.float32))
    rank = len(shape_of(op.x)) - 2
    strides = (
        [int(s) for s in np.atleast_1d(low.const(op.strides))]
        if op.strides is not None
        else [1] * rank
    )
    dilations = (
        [int(d) for d in np.atleast_1d(low.const(op.dilations))]
        if op.dilations is not None
        else [1] * rank
    )
    pad_type = str(low.const(op.pad_type)) if op.pad_type is not None else "valid"
    explicit = low.const(op.pad) if op.pad is not None else None
    kernel = tuple(weight.shape[2:])
    padding = conv_padding(pad_type, explicit, shape_of(op.x)[2:], kernel, strides, dilations)
    pads = [begin for begin, _ in padding] + [end for _, end in padding]
    inputs = [x, low.graph.constant(weight, np.float32)]
    if op.bias is not None:
        inputs.append(
            low.graph.constant(
                low.numerics.store(low.const(op.bias), np.dtype(np.float32)), np.float32
            )
        )
    groups = int(low.const(op.groups)) if op.groups is not None else 1
    return [
        low.node("Conv", *inputs, strides=strides, dilations=dilations, pads=pads, group=groups)
    ]


# -- normalization -------------------------------------------------------------------


@lowers("layer_norm")
def _layer_norm(low: Lowering, op: Any) -> list[str]:
    x = _float_input(low, op.x)
    shape = shape_of(op.x)
    axes = _axes(low, op, len(shape))
    count = int(np.prod([shape[axis] for axis in axes], dtype=np.int64))
    epsilon = low.const(op.epsilon) if op.epsilon is not None else 1e-5
    result, variance = composites.normalize(low.space, x, axes, count, float(epsilon))
    param_shape = [shape[axis] if axis in axes else 1 for axis in range(len(shape))]

    def param(var: Any) -> str | None:
        if var is None:
            return None
        values = low.numerics.store(low.const(var), np.dtype(np.float32))
        return low.graph.constant(values.reshape(param_shape), np.float32)

    low.probe = {"variance": low.node("ReduceSum", variance, keepdims=0)}
    return [composites.affine(low.space, result, param(op.gamma), param(op.beta))]


# -- layout --------------------------------------------------------------------------


@lowers("reshape")
def _reshape(low: Lowering, op: Any) -> list[str]:
    return [low.node("Reshape", low.value(op.x), low.constant(list(shape_of(op.outputs[0]))))]


@lowers("transpose")
def _transpose(low: Lowering, op: Any) -> list[str]:
    rank = len(shape_of(op.x))
    perm = [int(p) % rank for p in np.atleast_1d(low.const(op.perm))]
    return [low.node("Transpose", low.value(op.x), perm=perm)]


@lowers("expand_dims", "squeeze")
def _expand_squeeze(low: Lowering, op: Any) -> list[str]:
    return [low.node("Reshape", low.value(op.x), low.constant(list(shape_of(op.outputs[0]))))]


@lowers("concat")
def _concat(low: Lowering, op: Any) -> list[str]:
    if op.interleave is not None and bool(low.const(op.interleave)):
        raise NotLowerable("interleaved concat")
    rank = len(shape_of(op.values[0]))
    axis = int(low.const(op.axis)) % rank
    return [low.node("Concat", *[low.value(value) for value in op.values], axis=axis)]


@lowers("tile")
def _tile(low: Lowering, op: Any) -> list[str]:
    reps = [int(r) for r in np.atleast_1d(low.const(op.reps))]
    return [low.node("Tile", low.value(op.x), low.constant(reps))]


@lowers("slice_by_index")
def _slice_by_index(low: Lowering, op: Any) -> list[str]:
    shape = shape_of(op.x)
    rank = len(shape)

    def mask(var: Any) -> np.ndarray:
        return np.zeros(rank, bool) if var is None else np.asarray(low.const(var), bool)

    stride = np.ones(rank, np.int32) if op.stride is None else np.asarray(low.const(op.stride))
    slices = solve_slice_by_index_slice(
        shape, np.asarray(low.const(op.begin)), np.asarray(low.const(op.end)), stride,
        mask(op.begin_mask), mask(op.end_mask), mask(op.squeeze_mask),
    )  # fmt: skip
    starts, ends, steps = [], [], []
    for item, size in zip(slices, shape, strict=True):
        start, stop, step = item.indices(size) if isinstance(item, slice) else (item, item + 1, 1)
        starts.append(start)
        ends.append(stop if stop >= 0 else -(2**62))  # past the start, for negative steps
        steps.append(step)
    sliced = low.node(
        "Slice", low.value(op.x), low.constant(starts), low.constant(ends),
        low.constant(list(range(rank))), low.constant(steps),
    )  # fmt: skip
    return [low.node("Reshape", sliced, low.constant(list(shape_of(op.outputs[0]))))]


@lowers("gather")
def _gather(low: Lowering, op: Any) -> list[str]:
    from onnx import TensorProto

    if op.batch_dims is not None and int(low.const(op.batch_dims)) != 0:
        raise NotLowerable("gather with batch_dims")
    rank = len(shape_of(op.x))
    axis = int(low.const(op.axis)) % rank if op.axis is not None else 0
    indices = low.node("Cast", low.value(op.indices), to=TensorProto.INT64)
    return [low.node("Gather", low.value(op.x), indices, axis=axis)]

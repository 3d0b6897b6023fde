"""The ONNX graph of a MIL function being built, for the simulator's compiled engine and
the ONNX exporter.

Each op's lowering sits beside its reference implementation in :mod:`anekit.ops.defs`
(``@lowers``) and emits the ONNX ops that compute what the reference computes,
including the fp16 round trips of a composite's intermediates in ``ane`` mode. An op,
or an op variant, without a lowering raises :class:`NotLowerable`, and the program
runs in the interpreter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from anekit._milgraph import mil_defaults, numpy_dtype, static_shape
from anekit.onnxgraph import Graph
from anekit.ops import composites
from anekit.ops.numerics import Numerics
from anekit.ops.spaces import GraphSpace


class NotLowerable(Exception):
    """The function has an op (or an op variant) this module cannot lower."""


def onnx_type(dtype: np.dtype[Any]) -> int:
    from onnx import TensorProto

    if dtype.kind == "f":
        return int(TensorProto.FLOAT)
    if dtype.name not in ("int32", "int16", "int8", "uint8", "uint16", "bool", "int64"):
        raise NotLowerable(f"dtype {dtype}")
    return int(getattr(TensorProto, dtype.name.upper()))  # INT32, ..., BOOL


def shape_of(var: Any) -> tuple[int, ...]:
    shape = static_shape(var)
    if shape is None:
        raise NotLowerable(f"symbolic shape of {var.name}")
    return shape


@dataclass
class LoweredOp:
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
        self.records: list[LoweredOp] = []
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

    def float_value(self, var: Any) -> str:
        """The graph value of a float tensor input."""
        dtype = numpy_dtype(var)
        if dtype is None or dtype.kind != "f":
            raise NotLowerable(f"{var.name} is not a float tensor")
        return self.value(var)

    def axes(self, op: Any, rank: int) -> tuple[int, ...]:
        """A reduction's constant ``axes`` (None: all), sorted and non-negative."""
        axes = self.param(op, "axes")
        if axes is None:
            return tuple(range(rank))
        return tuple(sorted(int(axis) % rank for axis in np.atleast_1d(axes)))

    def keepdims(self, op: Any) -> bool:
        return bool(self.param(op, "keep_dims"))

    def const(self, var: Any) -> Any:
        """The compile-time value of a constant input (axes, modes, epsilons)."""
        if var is None:
            return None
        if var.op is None or var.op.op_type != "const":
            raise NotLowerable(f"input {var.name} must be a constant here")
        return var.val

    def param(self, op: Any, name: str) -> Any:
        """The compile-time value of ``op``'s input ``name`` (axes, modes, epsilons), or
        MIL's default for it from coremltools' op spec when the op has none (None when
        the default is "absent")."""
        var = op.inputs.get(name)
        return self.const(var) if var is not None else mil_defaults(op).get(name)

    def weight(self, var: Any) -> np.ndarray:
        """A constant float input (a weight, a bias) as the run's numerics store it."""
        return np.asarray(self.numerics.store(self.const(var), np.dtype(np.float32)))

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

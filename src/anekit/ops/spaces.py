"""The array spaces the composites (:mod:`anekit.ops.composites`) run in.

- :class:`NumpySpace`: NumPy arrays, now. ``rounding`` says whether ``store`` rounds to
  fp16 (the simulator's ``ane`` numerics) or keeps values (``fp32``, the reference);
  ``exp`` and ``erf`` may be given faster kernels with NumPy's semantics.
- :class:`GraphSpace`: names of values in an ONNX graph being built
  (:class:`anekit.onnxgraph.Graph`); ``store`` appends the fp16 round trip.
- :class:`CoreAISpace`: values of a Core AI graph being built (the builder a Core AI
  lowering gets, :class:`anekit.package.coreai.CoreAIBuilder`); ``store`` keeps values,
  since Core AI computes in the program's own dtype.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import special

from anekit.onnxgraph import Graph
from anekit.ops.fp16 import round_fp16


class NumpySpace:
    """NumPy arrays; scalars take the dtype of the arrays they meet (float32 here,
    float64 in a reference computed wide)."""

    def __init__(
        self,
        *,
        rounding: bool = False,
        dtype: Any = np.float32,
        exp: Callable[[Any], Any] = np.exp,
        erf: Callable[[Any], Any] = special.erf,
    ) -> None:
        self.rounding = rounding
        self.dtype = np.dtype(dtype)
        self._exp, self._erf = exp, erf

    def store(self, x: Any) -> Any:
        return round_fp16(x) if self.rounding else x

    def const(self, value: float) -> Any:
        return self.dtype.type(value)

    # The elementwise operations are NumPy's own.
    add = staticmethod(np.add)
    sub = staticmethod(np.subtract)
    mul = staticmethod(np.multiply)
    div = staticmethod(np.divide)
    tanh = staticmethod(np.tanh)
    sigmoid = staticmethod(special.expit)
    sqrt = staticmethod(np.sqrt)

    def exp(self, x: Any) -> Any:
        return self._exp(x)

    def erf(self, x: Any) -> Any:
        return np.asarray(self._erf(x), np.result_type(x))

    def max(self, x: Any, axes: tuple[int, ...]) -> Any:
        return np.max(x, axis=axes, keepdims=True)

    def sum(self, x: Any, axes: tuple[int, ...]) -> Any:
        wide = np.result_type(x, np.float32)
        return np.asarray(np.sum(x, axis=axes, keepdims=True, dtype=wide))

    def pair_sums(self, x: Any) -> Any:
        return x[..., 0::2] + x[..., 1::2]

    def pad_last(self, x: Any) -> Any:
        return np.concatenate([x, np.zeros((*x.shape[:-1], 1), x.dtype)], axis=-1)


def _onnx_op(op_type: str) -> Callable[..., str]:
    """A :class:`GraphSpace` method adding one ``op_type`` node of its inputs."""

    def method(self: GraphSpace, *inputs: str) -> str:
        return self.graph.node(op_type, *inputs)

    return method


class GraphSpace:
    """Values of an ONNX graph (float32 tensors named by strings); ``fp16`` stores
    intermediates rounded to fp16 and back."""

    def __init__(self, graph: Graph, *, fp16: bool) -> None:
        self.graph, self.fp16 = graph, fp16

    def _node(self, op_type: str, *inputs: str, **attributes: Any) -> str:
        return self.graph.node(op_type, *inputs, **attributes)

    def store(self, x: str) -> str:
        return self.graph.rounded(x) if self.fp16 else x

    def const(self, value: float) -> str:
        return self.graph.constant(np.float32(value), np.float32)

    # The elementwise operations: one ONNX node each.
    add = _onnx_op("Add")
    sub = _onnx_op("Sub")
    mul = _onnx_op("Mul")
    div = _onnx_op("Div")
    exp = _onnx_op("Exp")
    erf = _onnx_op("Erf")
    tanh = _onnx_op("Tanh")
    sigmoid = _onnx_op("Sigmoid")
    sqrt = _onnx_op("Sqrt")

    def max(self, x: str, axes: tuple[int, ...]) -> str:
        return self.graph.reduce("ReduceMax", x, list(axes), keepdims=True)

    def sum(self, x: str, axes: tuple[int, ...]) -> str:
        return self._node("ReduceSum", x, self.graph.constant(list(axes)), keepdims=1)

    def pair_sums(self, x: str) -> str:
        # (rows, n) as neighbour pairs (rows, n/2, 2), each pair summed exactly in fp32.
        pairs = self._node("Reshape", x, self.graph.constant([0, -1, 2]))
        return self._node("ReduceSum", pairs, self.graph.constant([-1]), keepdims=0)

    def pad_last(self, x: str) -> str:
        return self._node("Pad", x, self.graph.constant([0, 0, 0, 1]))


def _coreai_op(name: str) -> Callable[..., Any]:
    """A :class:`CoreAISpace` method applying the Core AI op ``name`` to its inputs."""

    def method(self: CoreAISpace, *inputs: Any) -> Any:
        return getattr(self.builder.ai, name)(*inputs)

    return method


class CoreAISpace:
    """Values of a Core AI graph in the dtype ``dtype`` (the op's own: float16 or
    float32); ``builder`` is what a Core AI lowering gets (``.ai`` the authoring
    module, ``.constant`` an array constant). Core AI's reductions keep their axes."""

    def __init__(self, builder: Any, dtype: Any) -> None:
        self.builder, self.dtype = builder, np.dtype(dtype)

    def store(self, x: Any) -> Any:
        return x

    def const(self, value: float) -> Any:
        return self.builder.constant(np.asarray(value, self.dtype))

    add = _coreai_op("broadcasting_add")
    sub = _coreai_op("broadcasting_sub")
    mul = _coreai_op("broadcasting_mul")
    div = _coreai_op("broadcasting_divide")
    exp = _coreai_op("exp")
    erf = _coreai_op("erf")
    tanh = _coreai_op("tanh")
    sigmoid = _coreai_op("sigmoid")
    sqrt = _coreai_op("sqrt")

    def max(self, x: Any, axes: tuple[int, ...]) -> Any:
        return self.builder.ai.reduce_max(x, np.asarray(axes, np.int32))

    def sum(self, x: Any, axes: tuple[int, ...]) -> Any:
        return self.builder.ai.reduce_sum(x, np.asarray(axes, np.int32))

    def pair_sums(self, x: Any) -> Any:
        raise NotImplementedError("Core AI sums whole axes (Space.sum)")

    def pad_last(self, x: Any) -> Any:
        raise NotImplementedError("Core AI sums whole axes (Space.sum)")


__all__ = ["CoreAISpace", "GraphSpace", "NumpySpace"]

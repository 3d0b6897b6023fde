"""The array spaces the composites (:mod:`anekit.ops.composites`) run in.

- :class:`NumpySpace`: NumPy arrays, now. ``rounding`` says whether ``store`` rounds to
  fp16 (the simulator's ``ane`` numerics) or keeps values (``fp32``, the reference);
  ``exp`` and ``erf`` may be given faster kernels with NumPy's semantics.
- :class:`GraphSpace`: names of values in an ONNX graph being built
  (:class:`anekit.onnxgraph.Graph`); ``store`` appends the fp16 round trip.
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

    def add(self, x: Any, y: Any) -> Any:
        return np.add(x, y)

    def sub(self, x: Any, y: Any) -> Any:
        return np.subtract(x, y)

    def mul(self, x: Any, y: Any) -> Any:
        return np.multiply(x, y)

    def div(self, x: Any, y: Any) -> Any:
        return np.divide(x, y)

    def exp(self, x: Any) -> Any:
        return self._exp(x)

    def erf(self, x: Any) -> Any:
        return np.asarray(self._erf(x), np.result_type(x))

    def tanh(self, x: Any) -> Any:
        return np.tanh(x)

    def sigmoid(self, x: Any) -> Any:
        return special.expit(x)

    def sqrt(self, x: Any) -> Any:
        return np.sqrt(x)

    def max(self, x: Any, axes: tuple[int, ...]) -> Any:
        return np.max(x, axis=axes, keepdims=True)

    def sum(self, x: Any, axes: tuple[int, ...]) -> Any:
        wide = np.result_type(x, np.float32)
        return np.asarray(np.sum(x, axis=axes, keepdims=True, dtype=wide))

    def pair_sums(self, x: Any) -> Any:
        return x[..., 0::2] + x[..., 1::2]

    def pad_last(self, x: Any) -> Any:
        return np.concatenate([x, np.zeros((*x.shape[:-1], 1), x.dtype)], axis=-1)


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

    def add(self, x: str, y: str) -> str:
        return self._node("Add", x, y)

    def sub(self, x: str, y: str) -> str:
        return self._node("Sub", x, y)

    def mul(self, x: str, y: str) -> str:
        return self._node("Mul", x, y)

    def div(self, x: str, y: str) -> str:
        return self._node("Div", x, y)

    def exp(self, x: str) -> str:
        return self._node("Exp", x)

    def erf(self, x: str) -> str:
        return self._node("Erf", x)

    def tanh(self, x: str) -> str:
        return self._node("Tanh", x)

    def sigmoid(self, x: str) -> str:
        return self._node("Sigmoid", x)

    def sqrt(self, x: str) -> str:
        return self._node("Sqrt", x)

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


__all__ = ["GraphSpace", "NumpySpace"]

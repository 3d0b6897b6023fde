"""Vectorized float32 kernels borrowed from ONNX Runtime's CPU provider (MLAS).

NumPy converts float32 to float16 with scalar code and has no ``erf``; SciPy's
``erf`` is scalar too. ONNX Runtime, already a dependency, has SIMD kernels for
both: its float16 casts are bit-identical to NumPy's (tested), and its ``Erf`` is
within one ulp of the exact value. Its GEMM (MLAS) also outruns the OpenBLAS that
NumPy wheels ship (about 400 against 220 GFLOP/s on the 2-core CI machine).

Each kernel is a small ONNX graph run in a cached session, with the same
semantics as the NumPy code it replaces; ``rounded=True`` appends the fp16
round trip (Cast to float16 and back) so that an ``ane``-mode result is stored in
the same pass. Small arrays stay in NumPy, where a session call costs more than
it saves.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import special

#: Below this many elements NumPy/SciPy are as fast as a session call.
MIN_SIZE = 1024
#: GEMMs of fewer multiply-adds than this run in NumPy.
MIN_GEMM_WORK = 1 << 20


class _Graph:
    """A tiny ONNX graph builder: float32 tensors, generated node names."""

    def __init__(self, name: str, opset: int = 17) -> None:
        from onnx import TensorProto, helper

        self.opset = opset
        self.helper = helper
        self.float = TensorProto.FLOAT
        self.half = TensorProto.FLOAT16
        self.name = name
        self.nodes: list[Any] = []
        self.inputs: list[Any] = []
        self.initializers: list[Any] = []
        self.count = 0

    def input(
        self, name: str, rank: int, elem_type: Any = None, shape: tuple[int, ...] | None = None
    ) -> str:
        dims: list[Any] = list(shape) if shape is not None else [f"{name}{i}" for i in range(rank)]
        kind = self.float if elem_type is None else elem_type
        self.inputs.append(self.helper.make_tensor_value_info(name, kind, dims))
        return name

    def constant(self, values: Any, dtype: Any = np.int64) -> str:
        from onnx import numpy_helper

        name = f"c{len(self.initializers)}"
        self.initializers.append(numpy_helper.from_array(np.asarray(values, dtype), name))
        return name

    def node(self, op_type: str, *inputs: str, **attributes: Any) -> str:
        self.count += 1
        output = f"t{self.count}"
        self.nodes.append(self.helper.make_node(op_type, list(inputs), [output], **attributes))
        return output

    def reduce(self, op_type: str, value: str, axes: Sequence[int], keepdims: bool) -> str:
        """``ReduceMax``/``ReduceMin``/``ReduceProd`` over ``axes``, in this graph's
        opset's form (``axes`` an attribute before opset 18, an input from 18 on)."""
        if self.opset >= 18:
            return self.node(op_type, value, self.constant(list(axes)), keepdims=int(keepdims))
        return self.node(op_type, value, axes=list(axes), keepdims=int(keepdims))

    def rounded(self, value: str) -> str:
        """``value`` rounded to fp16 and back to float32."""
        return self.node("Cast", self.node("Cast", value, to=self.half), to=self.float)

    def model(
        self,
        *outputs: str,
        types: list[Any] | None = None,
        names: list[str] | None = None,
        shapes: list[Sequence[int]] | None = None,
    ) -> Any:
        """The graph as an ONNX ``ModelProto``; ``outputs`` become ``names`` (default
        ``y``, ``y1``, ...) with ``shapes`` when known (a model for other tools must
        declare them: ``onnx.checker`` requires output shapes)."""
        names = names or ["y"] + [f"y{index}" for index in range(1, len(outputs))]
        kinds = types if types is not None else [self.float] * len(outputs)
        declared = shapes if shapes is not None else [None] * len(outputs)
        for output, name in zip(outputs, names, strict=True):
            self.nodes.append(self.helper.make_node("Identity", [output], [name]))
        graph = self.helper.make_graph(
            self.nodes,
            self.name,
            self.inputs,
            [
                self.helper.make_tensor_value_info(
                    name, kind, None if shape is None else [int(size) for size in shape]
                )
                for name, kind, shape in zip(names, kinds, declared, strict=True)
            ],
            initializer=self.initializers,
        )
        opset = self.helper.make_opsetid("", self.opset)
        model = self.helper.make_model(graph, opset_imports=[opset])
        model.ir_version = 8 if self.opset <= 17 else 10
        return model

    def session(self, *outputs: str, types: list[Any] | None = None) -> Any:
        """An ONNX Runtime session for the graph; ``outputs`` become ``y``, ``y1``, ..."""
        import onnxruntime

        model = self.model(*outputs, types=types)
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # errors only
        # Memory patterns keep one buffer per planned tensor: for a whole compiled
        # program that costs half a gigabyte more peak memory (MiniLM) and no speed.
        options.enable_mem_pattern = False
        # Keep the graph as written: a float->half->float round trip must not be folded.
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.inter_op_num_threads = 1
        # Worker threads must not spin after a run: they would steal the CPU that
        # BLAS and NumPy need for the next op.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return onnxruntime.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )


@functools.cache
def _elementwise(op_type: str, rounded: bool) -> Any:
    graph = _Graph(op_type)
    value = graph.input("x", 1)
    if op_type != "Identity":
        value = graph.node(op_type, value)
    return graph.session(graph.rounded(value) if rounded else value)


def _unary(op_type: str, array: np.ndarray, rounded: bool) -> np.ndarray:
    flat = np.ascontiguousarray(array, dtype=np.float32).reshape(-1)
    result = _elementwise(op_type, rounded).run(None, {"x": flat})[0]
    return np.asarray(result).reshape(array.shape)


def round_fp16(values: Any) -> np.ndarray:
    """``values`` rounded to the nearest float16 (ties to even, overflow to ±inf,
    subnormals kept), returned as float32."""
    array = np.asarray(values, dtype=np.float32)
    if array.size < MIN_SIZE:
        with np.errstate(over="ignore", invalid="ignore"):
            return array.astype(np.float16).astype(np.float32)
    return _unary("Identity", array, rounded=True)


def erf(values: Any) -> np.ndarray:
    """The error function of float32 values (within one ulp), as float32."""
    array = np.asarray(values, dtype=np.float32)
    if array.size < MIN_SIZE:
        return np.asarray(special.erf(array), dtype=np.float32)
    return _unary("Erf", array, rounded=False)


def exp(values: Any) -> np.ndarray:
    """``exp`` of float32 values, as float32."""
    array = np.asarray(values, dtype=np.float32)
    if array.size < MIN_SIZE:
        with np.errstate(over="ignore"):
            return np.exp(array)
    return _unary("Exp", array, rounded=False)


@functools.cache
def _gemm(with_bias: bool, rounded: bool) -> Any:
    graph = _Graph("gemm")
    inputs = [graph.input("a", 2), graph.input("w", 2)]
    if with_bias:
        inputs.append(graph.input("bias", 1))
    product = graph.node("Gemm", *inputs, transB=1)
    return graph.session(graph.rounded(product) if rounded else product)


def gemm_bt(a: np.ndarray, w: np.ndarray, bias: Any = None, *, rounded: bool = False) -> np.ndarray:
    """``a @ w.T (+ bias)`` for 2-D float32 ``a`` (m, k) and ``w`` (n, k), accumulated
    in float32, rounded once to fp16 when ``rounded``."""
    m, k = a.shape
    if m * k * w.shape[0] < MIN_GEMM_WORK:
        result = np.asarray(a @ w.T)
        if bias is not None:
            result = result + bias
        return round_fp16(result) if rounded else result
    feeds = {
        "a": np.ascontiguousarray(a, dtype=np.float32),
        "w": np.ascontiguousarray(w, dtype=np.float32),
    }
    if bias is not None:
        feeds["bias"] = np.ascontiguousarray(bias, dtype=np.float32).reshape(-1)
    return np.asarray(_gemm(bias is not None, rounded).run(None, feeds)[0])


@functools.cache
def _matmul(rounded: bool) -> Any:
    graph = _Graph("matmul")
    product = graph.node("MatMul", graph.input("a", 4), graph.input("b", 4))
    return graph.session(graph.rounded(product) if rounded else product)


def matmul(a: np.ndarray, b: np.ndarray, *, rounded: bool = False) -> np.ndarray:
    """NumPy ``matmul`` of float32 operands (rank 2 to 4 use MLAS), accumulated in
    float32, rounded once to fp16 when ``rounded``."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) if a.ndim >= 2 and b.ndim >= 2 else ()
    work = int(np.prod(batch, dtype=np.int64))
    small = a.ndim < 2 or b.ndim < 2 or a.ndim > 4 or b.ndim > 4
    if small or work * a.shape[-2] * a.shape[-1] * b.shape[-1] < MIN_GEMM_WORK:
        result = np.asarray(np.matmul(a, b))
        return round_fp16(result) if rounded else result
    feeds = {
        "a": np.ascontiguousarray(a, dtype=np.float32).reshape((1,) * (4 - a.ndim) + a.shape),
        "b": np.ascontiguousarray(b, dtype=np.float32).reshape((1,) * (4 - b.ndim) + b.shape),
    }
    result = np.asarray(_matmul(rounded).run(None, feeds)[0])
    return result.reshape(*batch, a.shape[-2], b.shape[-1])


def _sum(
    graph: _Graph, value: str, rank: int, axis: int, length: int, fp16: bool, pairwise: bool
) -> str:
    """Sum over one axis (kept), as ``Numerics.sum`` does: pairwise with every partial
    sum rounded to fp16 (``fp16 and pairwise``), else in fp32 (rounded once if ``fp16``)."""
    if not (fp16 and pairwise):
        total = graph.node("ReduceSum", value, graph.constant([axis]), keepdims=1)
        return graph.rounded(total) if fp16 else total
    level, size = graph.rounded(value), length
    while size > 1:
        if size % 2:
            pads = [0] * (2 * rank)
            pads[rank + axis] = 1
            level = graph.node("Pad", level, graph.constant(pads))
            size += 1
        if axis == rank - 1:
            # Neighbours as a trailing pair: (..., size/2, 2), summed exactly in fp32.
            pairs = graph.node("Reshape", level, graph.constant([0] * axis + [size // 2, 2]))
            added = graph.node("ReduceSum", pairs, graph.constant([-1]), keepdims=0)
        else:
            axes, step = graph.constant([axis]), graph.constant([2])
            begin, end = graph.constant([0]), graph.constant([size])
            even = graph.node("Slice", level, begin, end, axes, step)
            odd = graph.node("Slice", level, graph.constant([1]), end, axes, step)
            added = graph.node("Add", even, odd)
        level, size = graph.rounded(added), size // 2
    return level


@functools.cache
def _softmax(rank: int, axis: int, fp16: bool) -> Any:
    """softmax along ``axis`` as the simulator defines it: max-subtract, exp, sum
    (accumulated in fp32), divide; in fp16 every intermediate is stored rounded."""
    graph = _Graph("softmax")

    def store(value: str) -> str:
        return graph.rounded(value) if fp16 else value

    x = graph.input("x", rank)
    peak = graph.reduce("ReduceMax", x, [axis], keepdims=True)
    exps = store(graph.node("Exp", store(graph.node("Sub", x, peak))))
    total = store(graph.node("ReduceSum", exps, graph.constant([axis]), keepdims=1))
    return graph.session(store(graph.node("Div", exps, total)))


def softmax(x: np.ndarray, axis: int, *, rounded: bool) -> np.ndarray | None:
    """The simulator's softmax through MLAS kernels (result rounded when ``rounded``);
    None when NumPy should run it."""
    if x.size < MIN_SIZE or x.ndim > 6:
        return None
    session = _softmax(x.ndim, axis, rounded)
    return np.asarray(session.run(None, {"x": np.ascontiguousarray(x, dtype=np.float32)})[0])

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
from typing import Any

import numpy as np
from scipy import special

from anekit.onnxgraph import MIN_SIZE, Graph, run_elementwise
from anekit.ops import composites
from anekit.ops.fp16 import round_fp16
from anekit.ops.spaces import GraphSpace

#: GEMMs of fewer multiply-adds than this run in NumPy.
MIN_GEMM_WORK = 1 << 20


def erf(values: Any) -> np.ndarray:
    """The error function of float32 values (within one ulp), as float32."""
    array = np.asarray(values, dtype=np.float32)
    if array.size < MIN_SIZE:
        return np.asarray(special.erf(array), dtype=np.float32)
    return run_elementwise("Erf", array)


def exp(values: Any) -> np.ndarray:
    """``exp`` of float32 values, as float32."""
    array = np.asarray(values, dtype=np.float32)
    if array.size < MIN_SIZE:
        with np.errstate(over="ignore"):
            return np.exp(array)
    return run_elementwise("Exp", array)


@functools.cache
def _gemm(with_bias: bool, rounded: bool) -> Any:
    graph = Graph("gemm")
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
    graph = Graph("matmul")
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


@functools.cache
def _softmax(rank: int, axis: int, fp16: bool) -> Any:
    """The simulator's softmax (:func:`anekit.ops.composites.softmax`) as one session;
    in fp16 every intermediate and the result are stored rounded."""
    graph = Graph("softmax")
    space = GraphSpace(graph, fp16=fp16)
    return graph.session(space.store(composites.softmax(space, graph.input("x", rank), axis)))


def softmax(x: np.ndarray, axis: int, *, rounded: bool) -> np.ndarray | None:
    """The simulator's softmax through MLAS kernels (result rounded when ``rounded``);
    None when NumPy should run it."""
    if x.size < MIN_SIZE or x.ndim > 6:
        return None
    session = _softmax(x.ndim, axis, rounded)
    return np.asarray(session.run(None, {"x": np.ascontiguousarray(x, dtype=np.float32)})[0])

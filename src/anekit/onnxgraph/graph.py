"""A small ONNX graph builder: float32 tensors, generated node names, initializers,
and an ONNX Runtime session for the graph.

It is the base of everything anekit writes as ONNX: the simulator's compiled engine
and kernels (:mod:`anekit.sim`), and the ONNX exporter (:mod:`anekit.package`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

#: Below this many elements NumPy is as fast as a session call.
MIN_SIZE = 1024


class Graph:
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
    graph = Graph(op_type)
    value = graph.input("x", 1)
    if op_type != "Identity":
        value = graph.node(op_type, value)
    return graph.session(graph.rounded(value) if rounded else value)


def run_elementwise(op_type: str, array: np.ndarray, *, rounded: bool = False) -> np.ndarray:
    """ONNX Runtime's ``op_type`` (a unary elementwise op, or ``Identity``) on ``array``
    as float32, rounded to fp16 and back when ``rounded``, in a cached session."""
    flat = np.ascontiguousarray(array, dtype=np.float32).reshape(-1)
    result = _elementwise(op_type, rounded).run(None, {"x": flat})[0]
    return np.asarray(result).reshape(array.shape)


__all__ = ["MIN_SIZE", "Graph", "run_elementwise"]

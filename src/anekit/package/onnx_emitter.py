"""MIL -> ONNX: a MIL function as an ONNX model for ONNX Runtime on CPUs and GPUs.

The op semantics are the simulator's fp32 lowering (:mod:`anekit.ops.lowering`,
itself defined by the interpreter), so an emitted model computes what the
simulator computes in ``fp32`` mode. Where an op's record has an ``onnx_fused``
lowering, the emitter takes it: the fused ONNX operators ONNX Runtime has fast kernels
for (``layer_norm`` as LayerNormalization when it normalizes the trailing axes,
``softmax`` as Softmax, ``gelu`` as Gelu, opset 20).
Weights become initializers, so dynamic int8 quantization finds the matmuls and
convolutions with constant weights (:func:`anekit.package.onnx_int8.quantize_int8`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from anekit._milgraph import numpy_dtype
from anekit.errors import ProgramError
from anekit.ops import defs  # noqa: F401  (defines the ops)
from anekit.ops.lowering import Lowering, NotLowerable, onnx_type, shape_of
from anekit.ops.numerics import Numerics
from anekit.ops.registry import record

OPSET = 21
#: The lowering targets the emitter takes, preferred first.
TARGETS = ("onnx_fused", "onnx")


def to_onnx(program: Any, function: str | None = None) -> Any:
    """The ONNX model (``onnx.ModelProto``, opset 21) of one function of ``program``
    (a ``CompiledProgram`` or a MIL ``Program``), inputs and outputs named as in MIL.

    Raises :class:`ProgramError` naming the first op ONNX cannot express here."""
    if not hasattr(program, "functions"):  # a CompiledProgram
        function = function or program.function_name
        program = program.program
    name = function or ("main" if "main" in program.functions else next(iter(program.functions)))
    func = program.functions[name]
    low = Lowering(func, Numerics(mode="fp32"), opset=OPSET)
    for input_name, var in func.inputs.items():
        dtype = numpy_dtype(var)
        if dtype is None:
            raise ProgramError(f"input {input_name}: not a tensor ONNX can take")
        low.names[id(var)] = low.graph.input(
            input_name, len(shape_of(var)), onnx_type(dtype), shape_of(var)
        )
    for op in func.operations:
        if op.op_type == "const" or op.op_type.startswith("constexpr_"):
            value = op.outputs[0].val if op.op_type == "const" else op.materialized_val_inference()
            declared = numpy_dtype(op.outputs[0])
            if declared is None:
                continue  # strings (modes) are read while lowering
            dtype = np.dtype(np.float32) if declared.kind == "f" else declared
            low.pending[id(op.outputs[0])] = (np.asarray(value), dtype)
            continue
        lower = record(op.op_type).lowering_for(*TARGETS)
        if lower is None:
            raise ProgramError(f"{op.name}: ONNX emission has no lowering for {op.op_type}")
        try:
            outputs = lower(low, op)
        except NotLowerable as reason:
            raise ProgramError(f"{op.name} ({op.op_type}): cannot be emitted: {reason}") from None
        for var, output in zip(op.outputs, outputs, strict=True):
            low.names[id(var)] = output
    outputs = [low.names[id(var)] for var in func.outputs]
    types = []
    for var in func.outputs:
        dtype = numpy_dtype(var)
        if dtype is None:
            raise ProgramError(f"output {var.name}: not a tensor ONNX can return")
        types.append(onnx_type(dtype))
    return low.graph.model(
        *outputs,
        types=types,
        names=[var.name for var in func.outputs],
        shapes=[shape_of(var) for var in func.outputs],
    )


def save_onnx(model: Any, path: Path) -> Path:
    import onnx

    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path

"""``run_op``: one MIL op on concrete arrays, for unit tests and REPL checks.

>>> import numpy as np
>>> from anekit import sim
>>> sim.run_op("add", np.float16([60000]), np.float16([10000]), numerics="ane")
array([inf], dtype=float16)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from anekit import dtypes
from anekit._coremltools import Function, Program, ct, mb


def run_op(
    op_type: str,
    *arrays: Any,
    numerics: str = "ane",
    accumulation: str = "fp16",
    engine: str = "auto",
    **attributes: Any,
) -> Any:
    """Build a one-op program around ``op_type`` and simulate it.

    Positional ``arrays`` become the op's non-constant inputs, in the order of its
    MIL input spec; ``attributes`` are its other inputs (constants). ``engine`` is
    passed to :func:`anekit.sim.run`. Returns the output array (a tuple for
    multi-output ops).
    """
    from anekit.sim.interpreter import run

    op_class = _op_class(op_type)
    # Positional arrays fill the op's non-constant inputs in spec order.
    spec = op_class.input_spec.input_types
    names = [name for name, kind in spec.items() if not getattr(kind, "const", False)]
    tensor_names = [name for name in names if name not in attributes][: len(arrays)]
    placeholders = {}
    for name, array in zip(tensor_names, arrays, strict=True):
        value = np.asarray(array)
        dtype = dtypes.canonicalize(value.dtype)
        if dtype is None:
            raise TypeError(f"run_op: input {name!r} has unsupported dtype {value.dtype}")
        placeholders[name] = mb.placeholder(
            shape=value.shape, dtype=dtypes.to_mil(dtype), name=name
        )
    with Function(placeholders, opset_version=ct.target.iOS18) as function:
        inputs = {name: function.inputs[name] for name in tensor_names}
        outputs = getattr(mb, op_type)(**inputs, **attributes, name="result")
        outputs = list(outputs) if isinstance(outputs, list | tuple) else [outputs]
        function.set_outputs(outputs)
    program = Program()
    program.add_function("main", function)
    feeds = {name: np.asarray(array) for name, array in zip(tensor_names, arrays, strict=True)}
    result = run(program, feeds, mode=numerics, accumulation=accumulation, engine=engine)
    values = [result.outputs[var.name] for var in outputs]
    return values[0] if len(values) == 1 else tuple(values)


def _op_class(op_type: str) -> Any:
    """The MIL op class the builder uses for ``op_type`` at the iOS 18 opset."""
    from coremltools.converters.mil.mil.ops.registry import SSAOpRegistry

    versions = SSAOpRegistry.core_ops.get(op_type)
    if not versions:
        raise ValueError(f"unknown MIL op {op_type!r}")
    return versions[ct.target.iOS18]

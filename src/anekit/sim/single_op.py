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
    executor: str = "auto",
    engine: str | None = None,
    **attributes: Any,
) -> Any:
    """Build a one-op program around ``op_type`` and simulate it.

    Positional ``arrays`` become the op's non-constant inputs, in the order of its
    MIL input spec; ``attributes`` are its other inputs (constants). ``executor`` is
    passed to :func:`anekit.sim.run` (``engine``: its deprecated older name). Returns
    the output array (a tuple for multi-output ops).
    """
    from anekit.sim.interpreter import run

    program, feeds = single_op_program(op_type, *arrays, **attributes)
    result = run(
        program, feeds, mode=numerics, accumulation=accumulation, executor=executor, engine=engine
    )
    values = [result.outputs[var.name] for var in program.functions["main"].outputs]
    return values[0] if len(values) == 1 else tuple(values)


def single_op_program(op_type: str, *arrays: Any, **attributes: Any) -> tuple[Any, dict[str, Any]]:
    """A program (iOS 18 opset) whose function ``main`` is one ``op_type`` op, and its
    feeds: ``arrays`` fill the op's non-constant inputs in MIL input-spec order (named
    as those inputs; a tuple of arrays fills a tuple input, as inputs ``NAME_0``, ...),
    ``attributes`` are its constant inputs. Raises ``ValueError``
    for an op coremltools does not know, and coremltools' own errors for inputs
    the op refuses."""
    op_class = _op_class(op_type)
    spec = op_class.input_spec.input_types
    names = [name for name, kind in spec.items() if not getattr(kind, "const", False)]
    tensor_names = [name for name in names if name not in attributes][: len(arrays)]
    if len(tensor_names) < len(arrays):
        raise TypeError(f"{op_type}: takes {len(tensor_names)} tensor inputs, got {len(arrays)}")
    parts: dict[str, list[str]] = {}  # a tuple input (concat's values): one input per item
    feeds: dict[str, np.ndarray] = {}
    for name, array in zip(tensor_names, arrays, strict=True):
        if isinstance(array, list | tuple):
            parts[name] = [f"{name}_{index}" for index in range(len(array))]
            feeds.update(zip(parts[name], map(np.asarray, array), strict=True))
        else:
            parts[name] = [name]
            feeds[name] = np.asarray(array)
    placeholders = {}
    for name, value in feeds.items():
        dtype = dtypes.canonicalize(value.dtype)
        if dtype is None:
            raise TypeError(f"{op_type}: input {name!r} has unsupported dtype {value.dtype}")
        placeholders[name] = mb.placeholder(
            shape=value.shape, dtype=dtypes.to_mil(dtype), name=name
        )
    with Function(placeholders, opset_version=ct.target.iOS18) as function:
        inputs = {
            name: function.inputs[name]
            if parts[name] == [name]
            else tuple(function.inputs[part] for part in parts[name])
            for name in tensor_names
        }
        outputs = getattr(mb, op_type)(**inputs, **attributes, name="result")
        outputs = list(outputs) if isinstance(outputs, list | tuple) else [outputs]
        function.set_outputs(outputs)
    program = Program()
    program.add_function("main", function)
    return program, feeds


def _op_class(op_type: str) -> Any:
    """The MIL op class the builder uses for ``op_type`` at the iOS 18 opset."""
    from coremltools.converters.mil.mil.ops.registry import SSAOpRegistry

    versions = SSAOpRegistry.core_ops.get(op_type)
    if not versions:
        raise ValueError(f"unknown MIL op {op_type!r}")
    return versions[ct.target.iOS18]

"""Helpers for tracer tests: trace a function, evaluate its program, compare with NumPy.

Every traced program is evaluated twice, by independent evaluators: coremltools'
own per-op ``value_inference`` (tests/mil_eval.py) and anekit's simulator in fp32
reference mode. Both must match calling the function on NumPy arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import anekit
from anekit import sim
from anekit.program import CompiledProgram
from mil_eval import evaluate

_CANONICAL = {np.dtype(np.float64): np.dtype(np.float32), np.dtype(np.int64): np.dtype(np.int32)}


def flatten(result: Any) -> list[np.ndarray]:
    if isinstance(result, dict):
        return [np.asarray(value) for value in result.values()]
    if isinstance(result, tuple | list):
        return [np.asarray(value) for value in result]
    return [np.asarray(result)]


def feeds_of(program: CompiledProgram, *args: np.ndarray) -> dict[str, np.ndarray]:
    return {
        str(spec.name): np.asarray(arg) for spec, arg in zip(program.input_specs, args, strict=True)
    }


def run_program(program: CompiledProgram, *args: np.ndarray) -> list[np.ndarray]:
    """Evaluate the traced program with coremltools' value inference."""
    return evaluate(program.program, feeds_of(program, *args))


def run_simulator(
    program: CompiledProgram, *args: np.ndarray, mode: str = "fp32"
) -> list[np.ndarray]:
    """Run the program in anekit's simulator; outputs in their declared dtypes."""
    result = sim.run(program.program, feeds_of(program, *args), mode=mode)
    return [
        result.outputs[str(spec.name)].astype(spec.dtype, copy=False)
        for spec in program.output_specs
    ]


def assert_traces_like_numpy(
    fn: Callable[..., Any],
    *args: np.ndarray,
    rtol: float = 1e-6,
    atol: float = 1e-6,
) -> CompiledProgram:
    """Trace ``fn``, evaluate its program both ways, and compare with NumPy."""
    program = anekit.compile(fn, *args, passes=False)
    with np.errstate(all="ignore"):
        expected = flatten(fn(*args))
    for evaluator in (run_program, run_simulator):
        _compare(program, evaluator(program, *args), expected, rtol, atol, evaluator.__name__)
    return program


def _compare(
    program: CompiledProgram,
    actual: list[np.ndarray],
    expected: list[np.ndarray],
    rtol: float,
    atol: float,
    evaluator: str,
) -> None:
    assert len(actual) == len(expected)
    for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
        where = f"{evaluator}, output {index}"
        want_dtype = _CANONICAL.get(want.dtype, want.dtype)
        want_shape = want.shape if want.ndim else (1,)
        assert got.dtype == want_dtype, f"{where}: dtype {got.dtype}, NumPy {want_dtype}"
        assert got.shape == want_shape, f"{where}: shape {got.shape}, NumPy {want_shape}"
        assert program.output_specs[index].dtype == want_dtype
        assert program.output_specs[index].shape == want_shape
        if want.dtype.kind in "fc":
            np.testing.assert_allclose(
                got.astype(np.float64),
                want.reshape(want_shape).astype(np.float64),
                rtol=rtol,
                atol=atol,
                err_msg=where,
            )
        else:
            np.testing.assert_array_equal(
                got, want.reshape(want_shape).astype(want_dtype), err_msg=where
            )


def op_types(program: CompiledProgram) -> list[str]:
    """The program's op types in order, constants left out."""
    return [op.op_type for op in program.ops() if op.op_type != "const"]

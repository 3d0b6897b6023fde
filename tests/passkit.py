"""Helpers for pass tests: apply one pass, simulate, and read the placement rules."""

from __future__ import annotations

from typing import Any

import numpy as np
from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY

import anekit.passes
from anekit import sim
from anekit.analysis.analyzer import analyze_program
from anekit.passes import PassResult


def apply_pass(program: Any, name: str, **options: Any) -> PassResult:
    """Run ``ane::<name>`` on ``program`` in place, validate it, return what it did."""
    instance = PASS_REGISTRY[f"ane::{name}"]
    assert isinstance(instance, anekit.passes.AnePass)
    for option, value in options.items():
        setattr(instance, option, value)
    instance(program)
    program.validate()
    return instance.result


def run(program: Any, feeds: dict[str, np.ndarray], mode: str = "fp32") -> Any:
    """The simulator's result (outputs copied, so later runs cannot alias them)."""
    result = sim.run(program, feeds, mode=mode)
    result.outputs = {name: np.array(value) for name, value in result.outputs.items()}
    return result


def only(result: Any) -> np.ndarray:
    """The single output of a simulator result."""
    (value,) = result.outputs.values()
    return np.asarray(value)


def relative(got: np.ndarray, want: np.ndarray) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.abs(got - want).max() / np.abs(want).max())


def rules(program: Any) -> set[str]:
    """Every placement rule that fires on the program (ops and program level)."""
    (function,) = analyze_program(program, source="test").functions
    fired = {rule for op in function.compute_ops() for rule in op.rules}
    return fired | {finding.rule for finding in function.findings}


def op_types(program: Any) -> list[str]:
    (function,) = program.functions.values()
    return [op.op_type for op in function.operations if op.op_type != "const"]

"""The simulator's op table: MIL op type -> implementation.

An implementation is a function ``impl(ctx, **inputs)``: inputs arrive by their
MIL names (as in ONNX's reference evaluator), already in compute form (floats as
float32 arrays, constants such as ``axes`` or ``mode`` as NumPy values or
strings), with MIL's own defaults filled in. It returns one array, or a tuple
for multi-output ops; the interpreter stores results with the run's numerics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from anekit.ops.numerics import Numerics

OpImpl = Callable[..., Any]

REGISTRY: dict[str, OpImpl] = {}


@dataclass
class Note:
    """Something an op noticed while running (an internal fp16 overflow, say)."""

    rule: str
    message: str


@dataclass
class OpContext:
    """What an implementation may need beyond its inputs."""

    numerics: Numerics
    op: Any
    notes: list[Note] = field(default_factory=list)
    #: Set by an implementation whose float result is already stored as the run's
    #: numerics would store it (rounded inside a fused kernel).
    stored: bool = False
    #: Runs a nested block of ``op`` on its input values, returning its outputs.
    run_block: Callable[[Any, list[Any]], list[Any]] | None = None

    def note(self, rule: str, message: str) -> None:
        """Record a numerics warning about this op (shown in the run's report)."""
        self.notes.append(Note(rule, message))


def register(*op_types: str) -> Callable[[OpImpl], OpImpl]:
    """Register ``impl`` for each MIL op type; a duplicate is an error at import."""

    def decorate(impl: OpImpl) -> OpImpl:
        for op_type in op_types:
            if op_type in REGISTRY:
                raise RuntimeError(f"simulator op {op_type!r} registered twice")
            REGISTRY[op_type] = impl
        return impl

    return decorate


def supported_ops() -> list[str]:
    """Every MIL op type the simulator runs, sorted."""
    from anekit.sim import ops  # noqa: F401  (registers the implementations)

    return sorted(REGISTRY)

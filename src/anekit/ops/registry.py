"""One record per MIL op type: its reference implementation, its ONNX lowering, its
numeric-cliff checks and its groups.

The op families in :mod:`anekit.ops.defs` fill the records with three decorators:

- ``@register("op")``: the reference ``impl(ctx, **inputs)``. Inputs arrive by their MIL
  names (as in ONNX's reference evaluator), in compute form (floats as float32 arrays,
  constants such as ``axes`` or ``mode`` as NumPy values or strings), with MIL's
  defaults filled in; it returns one array, or a tuple for multi-output ops. The
  simulator's interpreter runs it, and stores results with the run's numerics.
- ``@lowers("op")``: ``lower(lowering, op) -> [graph values]``, the same semantics as
  ONNX ops (:class:`anekit.ops.lowering.Lowering`), for the simulator's compiled engine
  and the ONNX exporter; an op without one runs in the interpreter.
- ``@cliff("op")``: ``check(op, inputs, max_abs) -> [(rule, message)]``, a numeric
  cliff of the ANE that the op can fall off (rule ids in :data:`anekit.sim.report.RULES`).

Groups (matmul-like, value-preserving, ...) are in :mod:`anekit.ops.groups`; a record
lists those it belongs to. The op table (``analysis/data/ops.toml``) is keyed by the
same MIL op type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from anekit.ops import groups
from anekit.ops.numerics import Numerics

OpImpl = Callable[..., Any]
Lower = Callable[[Any, Any], list[str]]
Finding = tuple[str, str]
Cliff = Callable[[Any, Mapping[str, Any], float], list[Finding]]


@dataclass
class OpDef:
    """Everything anekit defines for one MIL op type."""

    op_type: str
    reference: OpImpl | None = None
    lowering: Lower | None = None
    cliffs: list[Cliff] = field(default_factory=list)

    @property
    def groups(self) -> frozenset[str]:
        """The names of the groups in :mod:`anekit.ops.groups` that hold this op."""
        return frozenset(
            name
            for name in groups.__all__
            if self.op_type in getattr(groups, name)  # every group is a frozenset of names
        )

    def check(self, op: Any, inputs: Mapping[str, Any], max_abs: float) -> list[Finding]:
        """The cliff rules that fire on ``op`` (its inputs, its largest |output|)."""
        return [finding for cliff in self.cliffs for finding in cliff(op, inputs, max_abs)]


#: Every op type anekit defines anything for, once :mod:`anekit.ops.defs` is imported.
OPS: dict[str, OpDef] = {}


def record(op_type: str) -> OpDef:
    """The record of ``op_type`` (an empty one if nothing defines it)."""
    return OPS.get(op_type) or OpDef(op_type)


def _define(role: str, op_types: tuple[str, ...]) -> Callable[[Any], Any]:
    def decorate(function: Any) -> Any:
        for op_type in op_types:
            entry = OPS.setdefault(op_type, OpDef(op_type))
            if role == "cliffs":
                entry.cliffs.append(function)
            elif getattr(entry, role) is not None:
                raise RuntimeError(f"{role} of MIL op {op_type!r} defined twice")
            else:
                setattr(entry, role, function)
        return function

    return decorate


def register(*op_types: str) -> Callable[[OpImpl], OpImpl]:
    """The reference implementation of each of ``op_types``."""
    return _define("reference", op_types)


def lowers(*op_types: str) -> Callable[[Lower], Lower]:
    """The ONNX lowering of each of ``op_types``."""
    return _define("lowering", op_types)


def cliff(*op_types: str) -> Callable[[Cliff], Cliff]:
    """A numeric-cliff check of each of ``op_types``."""
    return _define("cliffs", op_types)


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


def supported_ops() -> list[str]:
    """Every MIL op type the simulator runs, sorted."""
    from anekit.ops import defs  # noqa: F401  (defines the ops)

    return sorted(name for name, entry in OPS.items() if entry.reference is not None)

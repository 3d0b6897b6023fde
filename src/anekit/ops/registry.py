"""One record per MIL op type: its reference implementation, its lowerings, its
numeric-cliff checks and its groups.

The op families in :mod:`anekit.ops.defs` fill the records with three decorators:

- ``@register("op")``: the reference ``impl(ctx, **inputs)``. Inputs arrive by their MIL
  names (as in ONNX's reference evaluator), in compute form (floats as float32 arrays,
  constants such as ``axes`` or ``mode`` as NumPy values or strings), with MIL's
  defaults filled in from coremltools' op spec (:func:`anekit._milgraph.mil_defaults`;
  an implementation never restates one: a Python default stays only on an input that
  some opset version, or some op sharing the implementation, lacks, with a comment
  naming it); it returns one array, or a tuple for
  multi-output ops. The simulator's interpreter runs it, and stores results with the
  run's numerics.
- ``@lowers("op", target=...)``: ``lower(lowering, op) -> [graph values]``, one per
  target (:data:`TARGETS`): ``onnx``, the same semantics as the reference in ONNX ops
  (:class:`anekit.ops.lowering.Lowering`), for the simulator's compiled engine and the
  ONNX exporter; ``onnx_fused``, ONNX Runtime's fused operators, which the exporter
  prefers (fp32 only); ``coreai``, Core AI's builder (:mod:`anekit.package.coreai`:
  ``lower(builder, op)`` returns the op's Core AI value(s)). An op without an ``onnx``
  lowering runs in the interpreter.
- ``@cliff("op", rule=...)``: ``check(op, inputs, max_abs) -> [message]``, a numeric
  cliff of the ANE that the op can fall off, citing its hazard record
  (:data:`anekit.ops.hazards.RULES`); with ``probe``/``stand_in`` when the compiled engine
  must compute something beyond the op's output to check it.

Groups (matmul-like, value-preserving, ...) are in :mod:`anekit.ops.groups`; a record
lists those it belongs to. The op table (``analysis/data/ops.toml``) is keyed by the
same MIL op type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from anekit.ops import groups, hazards
from anekit.ops.numerics import Numerics

OpImpl = Callable[..., Any]
Lower = Callable[[Any, Any], list[str]]
Finding = tuple[str, str]
Check = Callable[[Any, Mapping[str, Any], float], list[str]]
#: Graph values (by probe name) the compiled engine reduces to scalars for a cliff.
Probe = Callable[[Any, Any], dict[str, str]]
#: Stand-ins for the op's inputs, from its probes' scalar values, for the cliff's check.
StandIn = Callable[[Any, Mapping[str, float]], dict[str, Any]]

#: The targets an op may be lowered to: ``onnx`` (the reference's semantics in ONNX ops,
#: with the run's numerics: the compiled simulator and the ONNX exporter) and
#: ``onnx_fused`` (ONNX Runtime's fused operators, fp32: the exporter, falling back to
#: ``onnx``). A new target (Core AI, MIL text) is a name here and ``@lowers(target=...)``
#: beside each op it covers.
TARGETS = ("onnx", "onnx_fused", "coreai")


@dataclass(frozen=True)
class Cliff:
    """A numeric cliff of the ANE: the hazard it checks for, and how.

    ``check(op, inputs, max_abs)`` returns a message per way the op falls off it.
    ``probe(lowering, op)`` adds the graph values the compiled engine reports for it
    (reduced to scalars), and ``stand_in(op, values)`` turns those values back into
    the inputs ``check`` reads; the interpreter passes the real inputs instead."""

    rule: str
    check: Check
    probe: Probe | None = None
    stand_in: StandIn | None = None


@dataclass
class OpDef:
    """Everything anekit defines for one MIL op type."""

    op_type: str
    reference: OpImpl | None = None
    #: target (one of :data:`TARGETS`) -> lowering.
    lowerings: dict[str, Lower] = field(default_factory=dict)
    cliffs: list[Cliff] = field(default_factory=list)

    @property
    def lowering(self) -> Lower | None:
        """The ``onnx`` lowering (the compiled simulator's), if any."""
        return self.lowerings.get("onnx")

    def lowering_for(self, *targets: str) -> Lower | None:
        """The lowering of the first of ``targets`` that this op has."""
        return next((self.lowerings[t] for t in targets if t in self.lowerings), None)

    def probes(self, low: Any, op: Any) -> dict[str, str]:
        """The graph values the cliffs of ``op`` need beside its output."""
        return {
            name: value
            for cliff in self.cliffs
            if cliff.probe is not None
            for name, value in cliff.probe(low, op).items()
        }

    def stand_ins(self, op: Any, values: Mapping[str, float]) -> dict[str, Any]:
        """Stand-ins for the inputs of ``op`` that its cliffs read, from probe values."""
        return {
            name: value
            for cliff in self.cliffs
            if cliff.stand_in is not None
            for name, value in cliff.stand_in(op, values).items()
        }

    @property
    def groups(self) -> frozenset[str]:
        """The names of the groups in :mod:`anekit.ops.groups` that hold this op."""
        return frozenset(
            name
            for name in groups.__all__
            if self.op_type in getattr(groups, name)  # every group is a frozenset of names
        )

    def check(self, op: Any, inputs: Mapping[str, Any], max_abs: float) -> list[Finding]:
        """(rule, message) per cliff rule that fires on ``op`` (its inputs, its largest
        |output|)."""
        return [
            (cliff.rule, message)
            for cliff in self.cliffs
            for message in cliff.check(op, inputs, max_abs)
        ]


#: Every op type anekit defines anything for, once :mod:`anekit.ops.defs` is imported.
OPS: dict[str, OpDef] = {}


def record(op_type: str) -> OpDef:
    """The record of ``op_type`` (an empty one if nothing defines it)."""
    return OPS.get(op_type) or OpDef(op_type)


def _entry(op_type: str) -> OpDef:
    return OPS.setdefault(op_type, OpDef(op_type))


def register(*op_types: str) -> Callable[[OpImpl], OpImpl]:
    """The reference implementation of each of ``op_types``."""

    def decorate(function: OpImpl) -> OpImpl:
        for op_type in op_types:
            entry = _entry(op_type)
            if entry.reference is not None:
                raise RuntimeError(f"reference of MIL op {op_type!r} defined twice")
            entry.reference = function
        return function

    return decorate


def lowers(*op_types: str, target: str = "onnx") -> Callable[[Lower], Lower]:
    """The lowering of each of ``op_types`` to ``target`` (one of :data:`TARGETS`)."""
    if target not in TARGETS:
        raise ValueError(f"unknown lowering target {target!r}; targets: {', '.join(TARGETS)}")

    def decorate(function: Lower) -> Lower:
        for op_type in op_types:
            entry = _entry(op_type)
            if target in entry.lowerings:
                raise RuntimeError(f"{target} lowering of MIL op {op_type!r} defined twice")
            entry.lowerings[target] = function
        return function

    return decorate


def cliff(
    *op_types: str, rule: str, probe: Probe | None = None, stand_in: StandIn | None = None
) -> Callable[[Check], Check]:
    """A numeric-cliff check of each of ``op_types`` for the hazard ``rule`` (an id in
    :data:`anekit.ops.hazards.RULES` that the simulator checks)."""
    known = hazards.RULES.get(rule)
    if known is None or "simulator" not in known.checked_by:
        raise ValueError(f"cliff rule {rule!r} is not a simulator hazard in anekit.ops.hazards")

    def decorate(check: Check) -> Check:
        for op_type in op_types:
            _entry(op_type).cliffs.append(Cliff(rule, check, probe, stand_in))
        return check

    return decorate


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

"""The checks of the placement rules beyond the op type.

Each rule is a hazard record (:data:`anekit.ops.hazards.RULES`, re-exported here as
:data:`RULES`: its id, severity, number, source and fix, shared with the simulator's
cliff checks); this module holds its check. A rule fires on an op (:data:`OP_CHECKS`,
run by ``op_checks``) or on the whole program (:data:`PROGRAM_CHECKS`, run by
``program_checks``). Sources are the keys of ane-knowledge.md §0 and prior-art.md §1.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from anekit._milgraph import is_constant, numpy_dtype
from anekit.ops.attention import oversized_scores
from anekit.ops.groups import (
    CONTROL_FLOW,
    LINEAR_LAYERS,
    LINEAR_QUANTIZED,
    PLUMBING,
    STATE,
    WEIGHTED_LAYERS,
)
from anekit.ops.hazards import RULES as RULES
from anekit.ops.hazards import Hazard, checked_by
from anekit.ops.limits import (
    AXIS_LIMIT,
    IOS_PACKAGE_LIMIT,
    KERNEL_WIDTH_LIMIT,
    MACOS_PACKAGE_LIMIT,
    MIN_ELEMENTS,
    MIN_IO_WIDTH,
    MIN_LAYERS,
    SRAM_BYTES,
)

#: Ops that hold values rather than compute them.
_NO_COMPUTE_DTYPE = frozenset({"const"})
#: Operand names that carry data (as opposed to shape, axes or other parameters).
_DATA_OPERANDS = ("x", "y", "input")

Hit = tuple[str, str]  # (rule id, message)


def _shapes(op: Any) -> Iterator[tuple[Any, tuple[Any, ...]]]:
    for var in [*op.get_flattened_inputs(), *op.outputs]:
        shape = getattr(var, "shape", None)
        if shape is not None:
            yield var, tuple(shape)


def _dynamic(shape: tuple[Any, ...]) -> bool:
    return any(not isinstance(dim, int | np.integer) for dim in shape)


@dataclass(frozen=True)
class ProgramFacts:
    """What the program-level rules look at, gathered from a function and its package."""

    inputs: list[tuple[str, tuple[Any, ...], np.dtype[Any] | None]]
    outputs: list[tuple[str, tuple[Any, ...], np.dtype[Any] | None]]
    weight_bytes: int
    package_bytes: int | None
    layers: int
    largest_tensor: int
    enumerated_inputs: list[str]
    platform: str


OpCheck = Callable[[Any], list[str]]
ProgramCheck = Callable[[ProgramFacts], list[str]]


# -- op checks: one message per way the op breaks the rule ---------------------------


def _flexible(op: Any) -> list[str]:
    dynamic = sorted({var.name for var, shape in _shapes(op) if _dynamic(shape)})
    return [f"{', '.join(dynamic)} has a flexible dimension"] if dynamic else []


def _plumbing(op: Any) -> list[str]:
    # Values known at compile time (``val`` set) are folded by Core ML's passes.
    found = []
    if op.op_type in PLUMBING and any(var.val is None for var in op.outputs):
        found.append(f"{op.op_type} computes a shape or fills at run time")
    if op.op_type == "reshape" and "shape" in op.inputs and op.inputs["shape"].val is None:
        found.append("reshape to a shape computed at run time")
    return found


def _rank5(op: Any) -> list[str]:
    ranks = [len(shape) for _, shape in _shapes(op) if shape]
    return [f"a tensor of rank {max(ranks)}"] if ranks and max(ranks) >= 5 else []


def _axis_limit(op: Any) -> list[str]:
    longest = max(
        (int(dim) for _, shape in _shapes(op) for dim in shape if not _dynamic((dim,))),
        default=0,
    )
    return [f"an axis of {longest} > {AXIS_LIMIT}"] if longest > AXIS_LIMIT else []


def _compute_dtypes(op: Any) -> set[np.dtype[Any]]:
    """What the op computes in: its outputs and its data operands (not shape/axes
    parameters, which are integers even in fp16 ops). A cast only counts for what it
    produces: fp16<->fp32 casts at the I/O are the op table's business."""
    if op.op_type in _NO_COMPUTE_DTYPE:
        return set()
    data = [] if op.op_type == "cast" else [op.inputs[k] for k in _DATA_OPERANDS if k in op.inputs]
    outputs = [
        var
        for var in op.outputs
        if op.op_type != "cast" or getattr(numpy_dtype(var), "kind", "f") in "iu"
    ]
    return {
        dtype
        for dtype in map(numpy_dtype, [*outputs, *data])
        if dtype is not None and dtype.kind != "b"
    }


def _fp32(op: Any) -> list[str]:
    return ["computes in fp32"] if np.dtype(np.float32) in _compute_dtypes(op) else []


def _integer(op: Any) -> list[str]:
    every = _compute_dtypes(op)
    if np.dtype(np.float32) in every or not any(dtype.kind in "iu" for dtype in every):
        return []  # fp32 compute is the finding then
    kinds = ", ".join(sorted(dtype.name for dtype in every if dtype.kind in "iu"))
    return [f"computes on integers ({kinds})"]


def _kernel_width(op: Any) -> list[str]:
    if op.op_type != "conv" or "weight" not in op.inputs:
        return []
    width = int(op.inputs["weight"].shape[-1])
    return [f"kernel width {width} >= {KERNEL_WIDTH_LIMIT}"] if width >= KERNEL_WIDTH_LIMIT else []


def _score_size(op: Any) -> list[str]:
    if op.op_type != "softmax":
        return []
    found = oversized_scores(op)
    if found is None:
        return []
    producer, elements = found
    return [f"scores from {producer.name}: {elements} elements per head"]


def _not_bc1s(op: Any) -> list[str]:
    if op.op_type in LINEAR_LAYERS and _constant_weight(op):
        return [f"{op.op_type} on {_shape_text(op)}, not a 1x1 conv"]
    return []


def _op_types(op_types: Collection[str]) -> OpCheck:
    """A check that fires on ops of these types, naming the type."""
    return lambda op: [op.op_type] if op.op_type in op_types else []


def _weight_chain(op: Any) -> list[list[str]]:
    """For each input of a linear-like op fed by constexpr ops: their types, in the
    order they decompress (``["constexpr_lut_to_dense", "constexpr_blockwise_shift_scale"]``
    for a palette with a per-channel scale)."""
    if op.op_type not in WEIGHTED_LAYERS:
        return []
    chains = []
    for var in op.get_flattened_inputs():
        chain: list[str] = []
        producers: list[Any] = [getattr(var, "op", None)]
        while producers:
            producer = producers.pop()
            kind = getattr(producer, "op_type", "")  # "" for an input
            if kind.startswith("constexpr_") and kind != "constexpr_cast":
                chain.insert(0, kind)
                producers.extend(getattr(i, "op", None) for i in producer.get_flattened_inputs())
        if chain:
            chains.append(chain)
    return chains


def _compressed(op: Any) -> list[str]:
    """Integer (linear) quantized weights, not a palette's per-channel scale."""
    return [
        f"weights from {chain[-1]}"
        for chain in _weight_chain(op)
        if LINEAR_QUANTIZED & set(chain) and "constexpr_lut_to_dense" not in chain
    ]


def _palette_scaled(op: Any) -> list[str]:
    """A palette (LUT) whose values a per-channel scale multiplies afterwards."""
    return [
        f"weights from {' -> '.join(chain)}"
        for chain in _weight_chain(op)
        if "constexpr_lut_to_dense" in chain and "constexpr_blockwise_shift_scale" in chain
    ]


def _constant_weight(op: Any) -> bool:
    """A linear, or a matmul one of whose operands is a compile-time constant."""
    if op.op_type == "linear":
        return True
    return any(is_constant(op.inputs[key]) or op.inputs[key].val is not None for key in ("x", "y"))


def _shape_text(op: Any) -> str:
    """The activation's shape, flexible dimensions as ``?`` (their names vary by run)."""
    dims = op.inputs["x"].shape
    return "(" + ", ".join(str(dim) if not _dynamic((dim,)) else "?" for dim in dims) + ")"


# -- program checks --------------------------------------------------------------------


def _enumerated(facts: ProgramFacts) -> list[str]:
    return [f"input {name!r} has enumerated shapes" for name in facts.enumerated_inputs]


def _int_inputs(facts: ProgramFacts) -> list[str]:
    return [
        f"input {name!r} is {dtype.name}"
        for name, _, dtype in facts.inputs
        if dtype is not None and dtype.kind in "iu"
    ]


def _narrow_io(facts: ProgramFacts) -> list[str]:
    return [
        f"{kind} {name!r} has a last axis of {int(shape[-1])}"
        for kind, items in (("input", facts.inputs), ("output", facts.outputs))
        for name, shape, _ in items
        if shape and not _dynamic(shape[-1:]) and int(shape[-1]) < MIN_IO_WIDTH
    ]


def _sram(facts: ProgramFacts) -> list[str]:
    if facts.weight_bytes <= SRAM_BYTES:
        return []
    return [f"{facts.weight_bytes / 2**20:.1f} MB of weights"]


def _package_size(facts: ProgramFacts) -> list[str]:
    limit = IOS_PACKAGE_LIMIT if facts.platform == "ios" else MACOS_PACKAGE_LIMIT
    size = facts.package_bytes if facts.package_bytes is not None else facts.weight_bytes
    if size <= limit:
        return []
    return [f"{size / 2**30:.2f} GB > {limit / 2**30:.0f} GB ({facts.platform})"]


def _too_small(facts: ProgramFacts) -> list[str]:
    if facts.layers < MIN_LAYERS:
        return [f"{facts.layers} matmul/conv layers < {MIN_LAYERS}"]
    if facts.largest_tensor < MIN_ELEMENTS:
        return [f"largest tensor has {facts.largest_tensor} < {MIN_ELEMENTS} elements"]
    return []


#: The check of each placement rule (a hazard in :data:`RULES` that the placement
#: analysis finds), on one op: a message per way the op breaks it.
OP_CHECKS: dict[str, OpCheck] = {
    "shape.dynamic": _flexible,
    "shape.plumbing": _plumbing,
    "rank.5": _rank5,
    "dtype.fp32": _fp32,
    "dtype.int": _integer,
    "op.tile": _op_types({"tile"}),
    "conv.kernel_width": _kernel_width,
    "shape.axis_limit": _axis_limit,
    "attention.score_size": _score_size,
    "state": _op_types(STATE),
    "control_flow": _op_types(CONTROL_FLOW),
    "layout.not_bc1s": _not_bc1s,
    "weights.compressed": _compressed,
    "weights.palette_scale": _palette_scaled,
}

#: The same on the whole function. ``op.table`` has neither: the analyzer applies the
#: op table.
PROGRAM_CHECKS: dict[str, ProgramCheck] = {
    "shape.enumerated": _enumerated,
    "io.int_input": _int_inputs,
    "io.narrow": _narrow_io,
    "weights.sram": _sram,
    "package.size": _package_size,
    "program.too_small": _too_small,
}


def _hits(checks: dict[str, OpCheck], subject: Any) -> list[Hit]:
    return [(rule, message) for rule, check in checks.items() for message in check(subject)]


def _in_rule_order(checks: dict[str, Any]) -> dict[str, Any]:
    return {rule: checks[rule] for rule in RULES if rule in checks}


def op_checks(op: Any) -> list[Hit]:
    """The rules that fire on one op, in the order of :data:`RULES`."""
    return _hits(_ORDERED_OP_CHECKS, op)


def program_checks(facts: ProgramFacts) -> list[Hit]:
    """The rules that fire on the whole function, in the order of :data:`RULES`."""
    return _hits(_ORDERED_PROGRAM_CHECKS, facts)


_ORDERED_OP_CHECKS: dict[str, OpCheck] = _in_rule_order(OP_CHECKS)
_ORDERED_PROGRAM_CHECKS: dict[str, ProgramCheck] = _in_rule_order(PROGRAM_CHECKS)


ConditionCheck = Callable[[Any], bool]


def _const_weight(op: Any) -> bool:
    return is_constant(op.inputs.get("weight"))  # False without a weight


def _lrn_size(op: Any) -> bool:
    size = op.inputs.get("size")
    return size is not None and size.val is not None and int(size.val) < 16


#: Condition ids the op table may use in ``ane_if`` verdicts, with their checks.
CONDITIONS: dict[str, tuple[ConditionCheck, str]] = {
    "const_weight": (_const_weight, "the weight must be a compile-time constant"),
    "lrn_size_lt_16": (_lrn_size, "local_response_norm needs size < 16 (AF)"),
}


def placement_rules() -> list[Hazard]:
    """The hazards the placement analysis finds, in the order of :data:`RULES`."""
    return list(checked_by("placement"))


def _check_wiring() -> None:
    placement = {rule.id for rule in placement_rules()}
    checked = set(OP_CHECKS) | set(PROGRAM_CHECKS) | {"op.table"}
    if placement != checked or set(OP_CHECKS) & set(PROGRAM_CHECKS):
        raise RuntimeError(f"placement rules without one check: {sorted(placement ^ checked)}")


_check_wiring()

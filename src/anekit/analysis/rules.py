"""Placement rules beyond the op type: each has an id, its number and its source.

A rule fires on an op (``op_checks``) or on the whole program (``program_checks``).
Its severity says what it means for placement: ``fallback`` (Core ML will not keep
the op, or the program, on the ANE) or ``risk`` (it may stay on the ANE but run
slowly or compute wrong values). Sources are the keys of ane-knowledge.md §0 and
prior-art.md §1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from anekit._milgraph import is_constant, numpy_dtype
from anekit.ops.attention import per_head_elements, score_producer
from anekit.ops.groups import CONTROL_FLOW, PLUMBING, STATE
from anekit.ops.limits import ATTENTION_SCORE_LIMIT, MIN_IO_WIDTH, SRAM_BYTES

Severity = Literal["fallback", "risk"]


@dataclass(frozen=True)
class RuleInfo:
    """What a rule checks, its threshold and where the threshold comes from."""

    id: str
    severity: Severity
    title: str
    source: str
    fix: str


RULES: dict[str, RuleInfo] = {
    rule.id: rule
    for rule in (
        RuleInfo(
            "op.table", "fallback", "the op table's verdict for this op type and family",
            "analysis/data/ops.toml (ane-knowledge.md §1, §1.1, §7)",
            "replace the op with ops the ANE runs, or keep it on the host (split the program)",
        ),
        RuleInfo(
            "shape.dynamic", "fallback", "a tensor with a flexible (RangeDim) or unknown dimension",
            "ane-knowledge.md §2.2 rule 14: RangeDim models ran 0-2 % on the ANE "
            "(coremltools#2370); flexible input shapes run on the CPU only (#1764)",
            "fix every shape: one function per shape bucket in a multifunction package, "
            "never RangeDim",
        ),
        RuleInfo(
            "shape.enumerated", "fallback", "enumerated input shapes inside one function",
            "ane-knowledge.md §2.2 rule 14: LayerNorm + EnumeratedShapes kept a model off the ANE "
            "(coremltools#1909)",
            "one function per shape in a multifunction package",
        ),
        RuleInfo(
            "shape.plumbing", "fallback", "runtime shape computation (shape, range_1d, fill or "
            "reshape fed by computed values)",
            "ane-knowledge.md §1 (shape: not implemented on ANE, AF); §2.2 rule 14 (static shapes)",
            "compute shapes at trace time; anekit's tracer does",
        ),
        RuleInfo(
            "rank.5", "fallback", "a tensor of rank 5 or more",
            "prior-art.md §1.2 (rank-5 intermediates make the ANE compiler fail for batch > 1 and "
            "the whole model falls back, eeane); AF: transpose+matmul fails at rank >= 5",
            "fold an axis into its neighbour: the ANE layout is (B, C, 1, S)",
        ),
        RuleInfo(
            "dtype.fp32", "fallback", "fp32 compute",
            "ane-knowledge.md §2.1 rule 1: the ANE computes in fp16 only; "
            "fp32 compute has no path (AF)",
            "convert at fp16 compute precision (anekit saves packages that way)",
        ),
        RuleInfo(
            "dtype.int", "fallback", "integer compute",
            "ane-knowledge.md §2.1 rule 1: int32 compute is rejected at MIL parse (AF)",
            "keep integer work (ids, masks) on the host; feed fp16 tensors",
        ),
        RuleInfo(
            "io.int_input", "risk", "an integer model input",
            "ane-knowledge.md §2.3 rule 20: integer-typed inputs, even unused, push placement to "
            "the CPU (EIL coreml102.md)",
            "take fp16 inputs: do lookups such as embeddings on the host",
        ),
        RuleInfo(
            "io.narrow", "risk", "an input or output whose last axis has fewer than 32 fp16 values",
            "ane-knowledge.md §2.2 rules 10-11: the last axis is padded to 64 bytes; runtime "
            "inputs need W >= 32 (SKY)",
            "put the long axis last: (B, C, 1, S) with S >= 32",
        ),
        RuleInfo(
            "op.tile", "fallback", "tile",
            "ane-knowledge.md §7.1: tile poisons later evaluations in the process (SKY, M3 Max) "
            "vs correct (AF); conservatively off the ANE",
            "broadcast in the consuming op instead",
        ),
        RuleInfo(
            "conv.kernel_width", "fallback", "a convolution kernel 16 or more wide",
            "ane-knowledge.md §2.2 rule 15: kernel width K >= 16 (1xK) fails ANECCompile "
            "on M5 (AF)",
            "split the kernel into narrower convolutions and add them",
        ),
        RuleInfo(
            "shape.axis_limit", "fallback", "an axis longer than 65536",
            "ane-knowledge.md §2.2 rule 13: per-axis size cap 65536 (AF)",
            "split the long axis",
        ),
        RuleInfo(
            "attention.score_size",
            "risk",
            "a per-head attention score tensor of 2^20 elements or more",
            "prior-art.md §1.4: the ANE returns wrong numbers at 2^20 elements per head's scores "
            "(eeane attention_split.py)",
            "split the attention along query rows so each piece stays below 2^20 scores",
        ),
        RuleInfo(
            "weights.sram", "risk", "more than 32 MB of weights",
            "ane-knowledge.md §2.3 rule 18: weights spill from on-chip SRAM at about 32 MB "
            "(MDX sram_probe on M4 Max; Orion); a slowdown, not a fallback",
            "split the model into programs of at most ~24 MB of weights, or compress weights",
        ),
        RuleInfo(
            "package.size", "fallback", "a package above 2 GB (macOS) or 1 GB (iOS)",
            "prior-art.md §1.1 and ane-knowledge.md §2.3 rule 19: larger models silently run "
            "entirely on the CPU/GPU (eeane; CML measured on iPhone)",
            "split the model into several packages (chunks)",
        ),
        RuleInfo(
            "program.too_small", "fallback", "a program too small to be worth an ANE dispatch",
            "ane-knowledge.md §2.2 rule 12: 1-2-layer graphs stay on the CPU whatever their ops; "
            "a 4-layer fp16 MLP is ANE-resident (stablehlo-coreml#110); aim for tensors of >= 64 "
            "elements (EIL)",
            "fuse more work into one program (at least 3 matmul/conv layers)",
        ),
        RuleInfo(
            "state", "fallback", "model state (read_state, coreml_update_state, slice_update)",
            "ane-knowledge.md §2.5 rule 32: state is not authorable on the "
            "single-procedure path (AF)",
            "pass state as inputs and outputs, or keep the stateful part on the CPU",
        ),
        RuleInfo(
            "control_flow", "fallback", "control flow (cond, while_loop, lists)",
            "ane-knowledge.md §2.5 rule 32: no loops or conditionals on the ANE (MDX, AF)",
            "unroll loops and select with where at trace time",
        ),
        RuleInfo(
            "layout.not_bc1s",
            "risk",
            "a linear layer (linear, or matmul with a constant weight) outside (B, C, 1, S)",
            "ane-knowledge.md §2.2 rule 9 and §3.1-3.2: the ANE's preferred layout is "
            "(B, C, 1, S) with linears as 1x1 convolutions (Apple's ml-ane-transformers: "
            "up to 10x faster)",
            "1x1 convolutions on (B, C, 1, S): anekit's to_bc1s pass rewrites them",
        ),
        RuleInfo(
            "weights.compressed", "risk", "int4/int8 compressed weights",
            "ane-knowledge.md §7.7: linear int4/int8 constexpr weights reported CPU-only by "
            "MLComputePlan on M4 (stablehlo-coreml#110) vs fast on the private path (MDX, AF)",
            "check the actual placement on a Mac (anekit doctor shows MLComputePlan there)",
        ),
    )
}  # fmt: skip

#: Thresholds, with the rule that uses each.
AXIS_LIMIT = 65536
MACOS_PACKAGE_LIMIT = 2 * 2**30
IOS_PACKAGE_LIMIT = 1 * 2**30
MIN_LAYERS = 3
MIN_ELEMENTS = 64
KERNEL_WIDTH_LIMIT = 16

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


def op_checks(op: Any) -> list[Hit]:
    """The rules that fire on one op."""
    hits: list[Hit] = []
    op_type = op.op_type
    shapes = list(_shapes(op))
    dynamic = [var.name for var, shape in shapes if _dynamic(shape)]
    if dynamic:
        hits.append(
            ("shape.dynamic", f"{', '.join(sorted(set(dynamic)))} has a flexible dimension")
        )
    # Values known at compile time (``val`` set) are folded by Core ML's passes.
    if op_type in PLUMBING and any(var.val is None for var in op.outputs):
        hits.append(("shape.plumbing", f"{op_type} computes a shape or fills at run time"))
    if op_type == "reshape" and "shape" in op.inputs and op.inputs["shape"].val is None:
        hits.append(("shape.plumbing", "reshape to a shape computed at run time"))
    ranks = [len(shape) for _, shape in shapes if shape]
    if ranks and max(ranks) >= 5:
        hits.append(("rank.5", f"a tensor of rank {max(ranks)}"))
    longest = max(
        (int(dim) for _, shape in shapes for dim in shape if not _dynamic((dim,))), default=0
    )
    if longest > AXIS_LIMIT:
        hits.append(("shape.axis_limit", f"an axis of {longest} > {AXIS_LIMIT}"))
    if op_type not in _NO_COMPUTE_DTYPE:
        # What the op computes in: its outputs and its data operands (not shape/axes
        # parameters, which are integers even in fp16 ops). A cast only counts for what
        # it produces: fp16<->fp32 casts at the I/O are the op table's business.
        data = (
            []
            if op_type == "cast"
            else [op.inputs[key] for key in _DATA_OPERANDS if key in op.inputs]
        )
        outputs = [
            var
            for var in op.outputs
            if op_type != "cast" or getattr(numpy_dtype(var), "kind", "f") in "iu"
        ]
        every = {
            dtype
            for dtype in map(numpy_dtype, [*outputs, *data])
            if dtype is not None and dtype.kind != "b"
        }
        if np.dtype(np.float32) in every:
            hits.append(("dtype.fp32", "computes in fp32"))
        elif any(dtype.kind in "iu" for dtype in every):
            kinds = ", ".join(sorted(dtype.name for dtype in every if dtype.kind in "iu"))
            hits.append(("dtype.int", f"computes on integers ({kinds})"))
    if op_type == "tile":
        hits.append(("op.tile", "tile"))
    if op_type == "conv" and "weight" in op.inputs:
        width = int(op.inputs["weight"].shape[-1])
        if width >= KERNEL_WIDTH_LIMIT:
            hits.append(("conv.kernel_width", f"kernel width {width} >= {KERNEL_WIDTH_LIMIT}"))
    if op_type == "softmax":
        producer = score_producer(op.inputs["x"])
        if producer is not None and not _dynamic(tuple(producer.outputs[0].shape)):
            elements = per_head_elements(producer)
            if elements >= ATTENTION_SCORE_LIMIT:
                hits.append(
                    (
                        "attention.score_size",
                        f"scores from {producer.name}: {elements} elements per head",
                    )
                )
    if op_type in ("linear", "matmul") and _constant_weight(op):
        hits.append(("layout.not_bc1s", f"{op_type} on {_shape_text(op)}, not a 1x1 conv"))
    if op_type in STATE:
        hits.append(("state", op_type))
    if op_type in CONTROL_FLOW:
        hits.append(("control_flow", op_type))
    if op_type in ("linear", "conv", "matmul", "conv_transpose"):
        for var in op.get_flattened_inputs():
            if (
                var.op is not None
                and var.op.op_type.startswith("constexpr_")
                and var.op.op_type != "constexpr_cast"
            ):
                hits.append(("weights.compressed", f"weights from {var.op.op_type}"))
                break
    return hits


def _constant_weight(op: Any) -> bool:
    """A linear, or a matmul one of whose operands is a compile-time constant."""
    if op.op_type == "linear":
        return True
    return any(is_constant(op.inputs[key]) or op.inputs[key].val is not None for key in ("x", "y"))


def _shape_text(op: Any) -> str:
    """The activation's shape, flexible dimensions as ``?`` (their names vary by run)."""
    dims = op.inputs["x"].shape
    return "(" + ", ".join(str(dim) if not _dynamic((dim,)) else "?" for dim in dims) + ")"


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


def program_checks(facts: ProgramFacts) -> list[Hit]:
    """The rules that fire on the whole function."""
    hits: list[Hit] = []
    for name, _, dtype in facts.inputs:
        if dtype is not None and dtype.kind in "iu":
            hits.append(("io.int_input", f"input {name!r} is {dtype.name}"))
    for kind, items in (("input", facts.inputs), ("output", facts.outputs)):
        for name, shape, _ in items:
            if shape and not _dynamic(shape[-1:]) and int(shape[-1]) < MIN_IO_WIDTH:
                hits.append(("io.narrow", f"{kind} {name!r} has a last axis of {int(shape[-1])}"))
    for name in facts.enumerated_inputs:
        hits.append(("shape.enumerated", f"input {name!r} has enumerated shapes"))
    if facts.weight_bytes > SRAM_BYTES:
        hits.append(("weights.sram", f"{facts.weight_bytes / 2**20:.1f} MB of weights"))
    limit = IOS_PACKAGE_LIMIT if facts.platform == "ios" else MACOS_PACKAGE_LIMIT
    size = facts.package_bytes if facts.package_bytes is not None else facts.weight_bytes
    if size > limit:
        hits.append(
            ("package.size", f"{size / 2**30:.2f} GB > {limit / 2**30:.0f} GB ({facts.platform})")
        )
    if facts.layers < MIN_LAYERS:
        hits.append(("program.too_small", f"{facts.layers} matmul/conv layers < {MIN_LAYERS}"))
    elif facts.largest_tensor < MIN_ELEMENTS:
        hits.append(
            (
                "program.too_small",
                f"largest tensor has {facts.largest_tensor} < {MIN_ELEMENTS} elements",
            )
        )
    return hits


ConditionCheck = Callable[[Any], bool]


def _const_weight(op: Any) -> bool:
    weight = op.inputs.get("weight")
    return weight is not None and is_constant(weight)


def _lrn_size(op: Any) -> bool:
    size = op.inputs.get("size")
    return size is not None and size.val is not None and int(size.val) < 16


#: Condition ids the op table may use in ``ane_if`` verdicts, with their checks.
CONDITIONS: dict[str, tuple[ConditionCheck, str]] = {
    "const_weight": (_const_weight, "the weight must be a compile-time constant"),
    "lrn_size_lt_16": (_lrn_size, "local_response_norm needs size < 16 (AF)"),
}

"""Placement rules beyond the op type: each has an id, its number and its source.

A rule fires on an op (``op_checks``) or on the whole program (``program_checks``).
Its severity says what it means for placement: ``fallback`` (Core ML will not keep
the op, or the program, on the ANE) or ``risk`` (it may stay on the ANE but run
slowly or compute wrong values). Sources are the keys of ane-knowledge.md §0 and
prior-art.md §1.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from anekit._milgraph import is_constant, numpy_dtype
from anekit.ops.attention import per_head_elements, score_producer
from anekit.ops.groups import CONTROL_FLOW, PLUMBING, STATE
from anekit.ops.limits import ATTENTION_SCORE_LIMIT, MIN_IO_WIDTH, SRAM_BYTES

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
    producer = score_producer(op.inputs["x"])
    if producer is None or _dynamic(tuple(producer.outputs[0].shape)):
        return []
    elements = per_head_elements(producer)
    if elements < ATTENTION_SCORE_LIMIT:
        return []
    return [f"scores from {producer.name}: {elements} elements per head"]


def _not_bc1s(op: Any) -> list[str]:
    if op.op_type in ("linear", "matmul") and _constant_weight(op):
        return [f"{op.op_type} on {_shape_text(op)}, not a 1x1 conv"]
    return []


def _op_types(op_types: Collection[str]) -> OpCheck:
    """A check that fires on ops of these types, naming the type."""
    return lambda op: [op.op_type] if op.op_type in op_types else []


def _weight_chain(op: Any) -> list[list[str]]:
    """For each input of a linear-like op fed by constexpr ops: their types, in the
    order they decompress (``["constexpr_lut_to_dense", "constexpr_blockwise_shift_scale"]``
    for a palette with a per-channel scale)."""
    if op.op_type not in ("linear", "conv", "matmul", "conv_transpose"):
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


#: Linear (integer) weight quantization: the formats reported off the ANE.
_LINEAR_QUANTIZED = frozenset(
    {"constexpr_affine_dequantize", "constexpr_blockwise_shift_scale",
     "constexpr_sparse_blockwise_shift_scale"}
)  # fmt: skip


def _compressed(op: Any) -> list[str]:
    """Integer (linear) quantized weights, not a palette's per-channel scale."""
    return [
        f"weights from {chain[-1]}"
        for chain in _weight_chain(op)
        if _LINEAR_QUANTIZED & set(chain) and "constexpr_lut_to_dense" not in chain
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


Severity = Literal["fallback", "risk"]


@dataclass(frozen=True)
class RuleInfo:
    """What a rule checks, its threshold, where the threshold comes from, and its check:
    ``on_op`` (a message per way an op breaks it) or ``on_program`` (the same for the
    whole function); ``op.table`` has neither, the analyzer applies the op table."""

    id: str
    severity: Severity
    title: str
    source: str
    fix: str
    on_op: OpCheck | None = None
    on_program: ProgramCheck | None = None


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
            on_op=_flexible,
        ),
        RuleInfo(
            "shape.enumerated", "fallback", "enumerated input shapes inside one function",
            "ane-knowledge.md §2.2 rule 14: LayerNorm + EnumeratedShapes kept a model off the ANE "
            "(coremltools#1909)",
            "one function per shape in a multifunction package",
            on_program=_enumerated,
        ),
        RuleInfo(
            "shape.plumbing", "fallback", "runtime shape computation (shape, range_1d, fill or "
            "reshape fed by computed values)",
            "ane-knowledge.md §1 (shape: not implemented on ANE, AF); §2.2 rule 14 (static shapes)",
            "compute shapes at trace time; anekit's tracer does",
            on_op=_plumbing,
        ),
        RuleInfo(
            "rank.5", "fallback", "a tensor of rank 5 or more",
            "prior-art.md §1.2 (rank-5 intermediates make the ANE compiler fail for batch > 1 and "
            "the whole model falls back, eeane); AF: transpose+matmul fails at rank >= 5",
            "fold an axis into its neighbour: the ANE layout is (B, C, 1, S)",
            on_op=_rank5,
        ),
        RuleInfo(
            "dtype.fp32", "fallback", "fp32 compute",
            "ane-knowledge.md §2.1 rule 1: the ANE computes in fp16 only; "
            "fp32 compute has no path (AF)",
            "convert at fp16 compute precision (anekit saves packages that way)",
            on_op=_fp32,
        ),
        RuleInfo(
            "dtype.int", "fallback", "integer compute",
            "ane-knowledge.md §2.1 rule 1: int32 compute is rejected at MIL parse (AF)",
            "keep integer work (ids, masks) on the host; feed fp16 tensors",
            on_op=_integer,
        ),
        RuleInfo(
            "io.int_input", "risk", "an integer model input",
            "ane-knowledge.md §2.3 rule 20: integer-typed inputs, even unused, push placement to "
            "the CPU (EIL coreml102.md)",
            "take fp16 inputs: do lookups such as embeddings on the host",
            on_program=_int_inputs,
        ),
        RuleInfo(
            "io.narrow", "risk", "an input or output whose last axis has fewer than 32 fp16 values",
            "ane-knowledge.md §2.2 rules 10-11: the last axis is padded to 64 bytes; runtime "
            "inputs need W >= 32 (SKY)",
            "put the long axis last: (B, C, 1, S) with S >= 32",
            on_program=_narrow_io,
        ),
        RuleInfo(
            "op.tile", "fallback", "tile",
            "ane-knowledge.md §7.1: tile poisons later evaluations in the process (SKY, M3 Max) "
            "vs correct (AF); conservatively off the ANE",
            "broadcast in the consuming op instead",
            on_op=_op_types({"tile"}),
        ),
        RuleInfo(
            "conv.kernel_width", "fallback", "a convolution kernel 16 or more wide",
            "ane-knowledge.md §2.2 rule 15: kernel width K >= 16 (1xK) fails ANECCompile "
            "on M5 (AF)",
            "split the kernel into narrower convolutions and add them",
            on_op=_kernel_width,
        ),
        RuleInfo(
            "shape.axis_limit", "fallback", "an axis longer than 65536",
            "ane-knowledge.md §2.2 rule 13: per-axis size cap 65536 (AF)",
            "split the long axis",
            on_op=_axis_limit,
        ),
        RuleInfo(
            "attention.score_size",
            "risk",
            "a per-head attention score tensor of 2^20 elements or more",
            "prior-art.md §1.4: the ANE returns wrong numbers at 2^20 elements per head's scores "
            "(eeane attention_split.py)",
            "split the attention along query rows so each piece stays below 2^20 scores",
            on_op=_score_size,
        ),
        RuleInfo(
            "weights.sram", "risk", "more than 32 MB of weights",
            "ane-knowledge.md §2.3 rule 18: weights spill from on-chip SRAM at about 32 MB "
            "(MDX sram_probe on M4 Max; Orion); a slowdown, not a fallback",
            "split the model into programs of at most ~24 MB of weights, or compress weights",
            on_program=_sram,
        ),
        RuleInfo(
            "package.size", "fallback", "a package above 2 GB (macOS) or 1 GB (iOS)",
            "prior-art.md §1.1 and ane-knowledge.md §2.3 rule 19: larger models silently run "
            "entirely on the CPU/GPU (eeane; CML measured on iPhone)",
            "split the model into several packages (chunks)",
            on_program=_package_size,
        ),
        RuleInfo(
            "program.too_small", "fallback", "a program too small to be worth an ANE dispatch",
            "ane-knowledge.md §2.2 rule 12: 1-2-layer graphs stay on the CPU whatever their ops; "
            "a 4-layer fp16 MLP is ANE-resident (stablehlo-coreml#110); aim for tensors of >= 64 "
            "elements (EIL)",
            "fuse more work into one program (at least 3 matmul/conv layers)",
            on_program=_too_small,
        ),
        RuleInfo(
            "state", "fallback", "model state (read_state, coreml_update_state, slice_update)",
            "ane-knowledge.md §2.5 rule 32: state is not authorable on the "
            "single-procedure path (AF)",
            "pass state as inputs and outputs, or keep the stateful part on the CPU",
            on_op=_op_types(STATE),
        ),
        RuleInfo(
            "control_flow", "fallback", "control flow (cond, while_loop, lists)",
            "ane-knowledge.md §2.5 rule 32: no loops or conditionals on the ANE (MDX, AF)",
            "unroll loops and select with where at trace time",
            on_op=_op_types(CONTROL_FLOW),
        ),
        RuleInfo(
            "layout.not_bc1s",
            "risk",
            "a linear layer (linear, or matmul with a constant weight) outside (B, C, 1, S)",
            "ane-knowledge.md §2.2 rule 9 and §3.1-3.2: the ANE's preferred layout is "
            "(B, C, 1, S) with linears as 1x1 convolutions (Apple's ml-ane-transformers: "
            "up to 10x faster)",
            "1x1 convolutions on (B, C, 1, S): anekit's to_bc1s pass rewrites them",
            on_op=_not_bc1s,
        ),
        RuleInfo(
            "weights.compressed", "risk", "int4/int8 linearly quantized weights",
            "ane-knowledge.md §7.7 and §2 rule 26: a conv/linear/matmul with int4/int8 "
            "constexpr weights reported supported=[CPU] by MLComputePlan on M4, at iOS26 too "
            "(kasper0406/stablehlo-coreml#110); 8-bit per-block weights gave cosine 0.367 on "
            "the ANE vs 0.999 on the GPU (apple/coreai-models#279); fast on the private path "
            "(MDX, AF)",
            "check the actual placement on a Mac (anekit doctor shows MLComputePlan there), "
            "or use a palette (compress='palettize4' / 'palettize4-g16'), which the ANE runs",
            on_op=_compressed,
        ),
        RuleInfo(
            "weights.palette_scale", "risk", "a palette followed by a per-channel scale",
            "ane-knowledge.md §2 rule 26: OpPalettizerConfig(enable_per_channel_scale=True) "
            "fails MPSGraph verification at ANE load on macOS 26 (apple/coremltools#2688); "
            "the ANE needs the scale after the conv (coremltools' "
            "common::reorder_lut_per_channel_scale); LUT + block-wise scale chains are "
            "rejected with error -14 (CML DECODE_STATE_LAYOUTS.md §8)",
            "palettize without a per-channel scale (per tensor or per grouped channel)",
            on_op=_palette_scaled,
        ),
    )
}  # fmt: skip


def _hits(checks: dict[str, OpCheck], subject: Any) -> list[Hit]:
    return [(rule, message) for rule, check in checks.items() for message in check(subject)]


def op_checks(op: Any) -> list[Hit]:
    """The rules that fire on one op, in the order of :data:`RULES`."""
    return _hits({rule.id: rule.on_op for rule in RULES.values() if rule.on_op is not None}, op)


def program_checks(facts: ProgramFacts) -> list[Hit]:
    """The rules that fire on the whole function, in the order of :data:`RULES`."""
    checks = {rule.id: rule.on_program for rule in RULES.values() if rule.on_program is not None}
    return _hits(checks, facts)


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

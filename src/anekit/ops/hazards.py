"""One record per hazard: each ANE limit (and each simulator finding) with its rule id,
its number, its source and its fix.

Both sides that find hazards cite these records by id: the placement analysis
(:mod:`anekit.analysis.rules` holds a check per placement rule) and the simulator (the
``@cliff`` checks of :mod:`anekit.ops.defs`, and the findings of its numerics report).
A limit that both check (the attention score size) is one record with one id.

``checked_by`` says who finds the hazard: ``placement`` (a report of
:func:`anekit.analysis.analyze`), ``simulator`` (a run's
:class:`anekit.sim.NumericsReport`) or both. ``severity`` is what it means for the
program on the ANE: ``fallback`` (Core ML will not keep the op, or the program, on the
ANE) or ``risk`` (it may stay there but run slowly or compute wrong values).

Rule ids are stable: users store them (JSON reports) and type them
(``report.warnings_for(...)``). An id that was retired when two ids of one limit were
merged stays accepted as an alias (:data:`ALIASES`, :func:`canonical`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from anekit.ops.limits import (
    ATTENTION_SCORE_LIMIT,
    AXIS_LIMIT,
    KERNEL_WIDTH_LIMIT,
    MACOS_PACKAGE_LIMIT,
    MATMUL_SATURATION,
    MIN_IO_WIDTH,
    MIN_LAYERS,
    SMALL_LOG_INPUT,
    SRAM_BYTES,
    WIDTH_SLICE_LIMIT,
)

Severity = Literal["fallback", "risk"]
Checker = Literal["placement", "simulator"]


@dataclass(frozen=True)
class Hazard:
    """One hazard: what fires it, its number, where the number comes from, the fix."""

    id: str
    severity: Severity
    title: str
    source: str
    fix: str
    checked_by: tuple[Checker, ...]
    #: The number (from :mod:`anekit.ops.limits`), where the hazard has one.
    limit: float | None = None
    #: Retired ids of this hazard, still accepted where users give a rule id.
    aliases: tuple[str, ...] = ()


_P: tuple[Checker, ...] = ("placement",)
_S: tuple[Checker, ...] = ("simulator",)

#: Every hazard, by rule id.
RULES: dict[str, Hazard] = {
    hazard.id: hazard
    for hazard in (
        Hazard(
            "op.table", "fallback", "the op table's verdict for this op type and family",
            "analysis/data/ops.toml (ane-knowledge.md §1, §1.1, §7)",
            "replace the op with ops the ANE runs, or keep it on the host (split the program)",
            _P,
        ),
        Hazard(
            "shape.dynamic", "fallback", "a tensor with a flexible (RangeDim) or unknown dimension",
            "ane-knowledge.md §2.2 rule 14: RangeDim models ran 0-2 % on the ANE "
            "(coremltools#2370); flexible input shapes run on the CPU only (#1764)",
            "fix every shape: one function per shape bucket in a multifunction package, "
            "never RangeDim",
            _P,
        ),
        Hazard(
            "shape.enumerated", "fallback", "enumerated input shapes inside one function",
            "ane-knowledge.md §2.2 rule 14: LayerNorm + EnumeratedShapes kept a model off the ANE "
            "(coremltools#1909)",
            "one function per shape in a multifunction package",
            _P,
        ),
        Hazard(
            "shape.plumbing", "fallback", "runtime shape computation (shape, range_1d, fill or "
            "reshape fed by computed values)",
            "ane-knowledge.md §1 (shape: not implemented on ANE, AF); §2.2 rule 14 (static shapes)",
            "compute shapes at trace time; anekit's tracer does",
            _P,
        ),
        Hazard(
            "rank.5", "fallback", "a tensor of rank 5 or more",
            "prior-art.md §1.2 (rank-5 intermediates make the ANE compiler fail for batch > 1 and "
            "the whole model falls back, eeane); AF: transpose+matmul fails at rank >= 5",
            "fold an axis into its neighbour: the ANE layout is (B, C, 1, S)",
            _P, limit=5,
        ),
        Hazard(
            "dtype.fp32", "fallback", "fp32 compute",
            "ane-knowledge.md §2.1 rule 1: the ANE computes in fp16 only; "
            "fp32 compute has no path (AF)",
            "convert at fp16 compute precision (anekit saves packages that way)",
            _P,
        ),
        Hazard(
            "dtype.int", "fallback", "integer compute",
            "ane-knowledge.md §2.1 rule 1: int32 compute is rejected at MIL parse (AF)",
            "keep integer work (ids, masks) on the host; feed fp16 tensors",
            _P,
        ),
        Hazard(
            "io.int_input", "risk", "an integer model input",
            "ane-knowledge.md §2.3 rule 20: integer-typed inputs, even unused, push placement to "
            "the CPU (EIL coreml102.md)",
            "take fp16 inputs: do lookups such as embeddings on the host",
            _P,
        ),
        Hazard(
            "io.narrow", "risk", "an input or output whose last axis has fewer than 32 fp16 values",
            "ane-knowledge.md §2.2 rules 10-11: the last axis is padded to 64 bytes; runtime "
            "inputs need W >= 32 (SKY)",
            "put the long axis last: (B, C, 1, S) with S >= 32",
            _P, limit=MIN_IO_WIDTH,
        ),
        Hazard(
            "op.tile", "fallback", "tile",
            "ane-knowledge.md §7.1: tile poisons later evaluations in the process (SKY, M3 Max) "
            "vs correct (AF); conservatively off the ANE",
            "broadcast in the consuming op instead",
            _P,
        ),
        Hazard(
            "conv.kernel_width", "fallback", "a convolution kernel 16 or more wide",
            "ane-knowledge.md §2.2 rule 15: kernel width K >= 16 (1xK) fails ANECCompile "
            "on M5 (AF)",
            "split the kernel into narrower convolutions and add them",
            _P, limit=KERNEL_WIDTH_LIMIT,
        ),
        Hazard(
            "shape.axis_limit", "fallback", "an axis longer than 65536",
            "ane-knowledge.md §2.2 rule 13: per-axis size cap 65536 (AF)",
            "split the long axis",
            _P, limit=AXIS_LIMIT,
        ),
        Hazard(
            "attention.score_size",
            "risk",
            "a per-head attention score tensor of 2^20 elements or more",
            "prior-art.md §1.4: the ANE returns wrong numbers at 2^20 elements per head's scores "
            "(eeane attention_split.py)",
            "split the attention along query rows so each piece stays below 2^20 scores",
            ("placement", "simulator"), limit=ATTENTION_SCORE_LIMIT,
            aliases=("ane.attention_score_size",),
        ),
        Hazard(
            "weights.sram", "risk", "more than 32 MB of weights",
            "ane-knowledge.md §2.3 rule 18: weights spill from on-chip SRAM at about 32 MB "
            "(MDX sram_probe on M4 Max; Orion); a slowdown, not a fallback",
            "split the model into programs of at most ~24 MB of weights, or compress weights",
            _P, limit=SRAM_BYTES,
        ),
        Hazard(
            "package.size", "fallback", "a package above 2 GB (macOS) or 1 GB (iOS)",
            "prior-art.md §1.1 and ane-knowledge.md §2.3 rule 19: larger models silently run "
            "entirely on the CPU/GPU (eeane; CML measured on iPhone)",
            "split the model into several packages (chunks)",
            _P, limit=MACOS_PACKAGE_LIMIT,
        ),
        Hazard(
            "program.too_small", "fallback", "a program too small to be worth an ANE dispatch",
            "ane-knowledge.md §2.2 rule 12: 1-2-layer graphs stay on the CPU whatever their ops; "
            "a 4-layer fp16 MLP is ANE-resident (stablehlo-coreml#110); aim for tensors of >= 64 "
            "elements (EIL)",
            "fuse more work into one program (at least 3 matmul/conv layers)",
            _P, limit=MIN_LAYERS,
        ),
        Hazard(
            "state", "fallback", "model state (read_state, coreml_update_state, slice_update)",
            "ane-knowledge.md §2.5 rule 32: state is not authorable on the "
            "single-procedure path (AF)",
            "pass state as inputs and outputs, or keep the stateful part on the CPU",
            _P,
        ),
        Hazard(
            "control_flow", "fallback", "control flow (cond, while_loop, lists)",
            "ane-knowledge.md §2.5 rule 32: no loops or conditionals on the ANE (MDX, AF)",
            "unroll loops and select with where at trace time",
            _P,
        ),
        Hazard(
            "layout.not_bc1s",
            "risk",
            "a linear layer (linear, or matmul with a constant weight) outside (B, C, 1, S)",
            "ane-knowledge.md §2.2 rule 9 and §3.1-3.2: the ANE's preferred layout is "
            "(B, C, 1, S) with linears as 1x1 convolutions (Apple's ml-ane-transformers: "
            "up to 10x faster)",
            "1x1 convolutions on (B, C, 1, S): anekit's to_bc1s pass rewrites them",
            _P,
        ),
        Hazard(
            "weights.compressed", "risk", "int4/int8 linearly quantized weights",
            "ane-knowledge.md §7.7 and §2 rule 26: a conv/linear/matmul with int4/int8 "
            "constexpr weights reported supported=[CPU] by MLComputePlan on M4, at iOS26 too "
            "(kasper0406/stablehlo-coreml#110); 8-bit per-block weights gave cosine 0.367 on "
            "the ANE vs 0.999 on the GPU (apple/coreai-models#279); fast on the private path "
            "(MDX, AF)",
            "check the actual placement on a Mac (anekit doctor shows MLComputePlan there), "
            "or use a palette (compress='palettize4' / 'palettize4-g16'), which the ANE runs",
            _P,
        ),
        Hazard(
            "weights.palette_scale", "risk", "a palette followed by a per-channel scale",
            "ane-knowledge.md §2 rule 26: OpPalettizerConfig(enable_per_channel_scale=True) "
            "fails MPSGraph verification at ANE load on macOS 26 (apple/coremltools#2688); "
            "the ANE needs the scale after the conv (coremltools' "
            "common::reorder_lut_per_channel_scale); LUT + block-wise scale chains are "
            "rejected with error -14 (CML DECODE_STATE_LAYOUTS.md §8)",
            "palettize without a per-channel scale (per tensor or per grouped channel)",
            _P,
        ),
        Hazard(
            "sim.nonfinite", "risk", "the op produced inf or NaN from finite inputs",
            "the simulator's fp16 arithmetic (docs/simulator.md): a value above 65504 is inf",
            "keep intermediates within fp16's range: scale inputs or weights down, or use the "
            "ANE passes that do (ane::fp16_safe_norm, ane::prescale_query)",
            _S,
        ),
        Hazard(
            "sim.internal_overflow", "risk",
            "an intermediate inside the op overflowed fp16, so its output is wrong even where "
            "finite",
            "the simulator's fp16 composites (docs/simulator.md): a norm's variance overflows "
            "when a squared deviation, or their sum, exceeds 65504 (seed 000, semlith)",
            "run the ane::fp16_safe_norm pass (it divides each row by its peak first)",
            _S,
        ),
        Hazard(
            "ane.matmul_saturation", "risk",
            "matmul/conv/linear/einsum outputs above 32752 (about fp16 max / 2) saturate to ±inf "
            "on the ANE",
            "M2 Pro, M5; aneforge docs/numeric-cliffs.md, prior-art.md §1.7",
            "scale an operand down so the outputs stay below 32752 (ane::prescale_query does "
            "for attention scores)",
            _S, limit=MATMUL_SATURATION,
        ),
        Hazard(
            "ane.small_log_input", "risk",
            "rsqrt/log inputs below about 7.63e-6 return ±inf on the ANE",
            "libane docs/graph-ir.md, prior-art.md §1.8",
            "add an epsilon of at least 7.63e-6 before the rsqrt/log, or scale the input up "
            "(ane::fp16_safe_norm)",
            _S, limit=SMALL_LOG_INPUT,
        ),
        Hazard(
            "ane.width_slice_saturation", "risk",
            "before A16, a slice with a non-zero offset on the last axis saturates values above "
            "|4094|",
            "ane-knowledge.md §2.1 rule 7",
            "slice at offset 0 of the last axis (move the sliced axis elsewhere), or keep the "
            "values below 4094",
            _S, limit=WIDTH_SLICE_LIMIT,
        ),
    )
}  # fmt: skip

#: Retired rule id -> the id of the same hazard now.
ALIASES: dict[str, str] = {
    alias: hazard.id for hazard in RULES.values() for alias in hazard.aliases
}


def canonical(rule: str) -> str:
    """The current id of ``rule``: itself, or the id an alias stands for."""
    return ALIASES.get(rule, rule)


def hazard(rule: str) -> Hazard:
    """The record of ``rule`` (an id or an alias); KeyError if there is none."""
    return RULES[canonical(rule)]


def checked_by(checker: Checker) -> Iterator[Hazard]:
    """The hazards ``checker`` finds, in the order of :data:`RULES`."""
    return (item for item in RULES.values() if checker in item.checked_by)


__all__ = ["ALIASES", "RULES", "Hazard", "canonical", "checked_by", "hazard"]

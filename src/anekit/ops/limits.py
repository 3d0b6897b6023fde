"""The ANE's limits and conventions, each number stated once.

Sources are in shared/docs/ane-knowledge.md (cited as §section rule) and
prior-art.md; every pass, rule, cliff check and model that needs one imports it here.
A limit that a placement rule or a simulator cliff checks is also a hazard record
(:mod:`anekit.ops.hazards`: its rule id, source and fix), which cites the number here.
"""

from __future__ import annotations

#: The largest finite float16 value.
FP16_MAX = 65504.0
#: float16's smallest positive (subnormal) value: an epsilon below it is 0 in fp16.
FP16_TINY = 2.0**-24

#: Per-head attention score tensors of this many elements or more are computed wrongly
#: on the ANE (prior-art.md §1.4, eeane ``attention_split.py``): attention is split so
#: that no score tensor reaches it.
ATTENTION_SCORE_LIMIT = 2**20

#: The additive mask value: finite in fp16 (several masks add up to -2e4, still
#: finite), exp(-1e4) = 0 in fp16 and fp32; -inf gives NaN on fully masked rows
#: (ane-knowledge.md §2.1 rule 5; Apple's ml-ane-transformers).
MASK_FILL = -1e4

#: Narrowest last axis the ANE reads reliably: 32 fp16 values = 64 bytes, the row
#: stride's alignment (ane-knowledge.md §2 rules 10 and 11: runtime inputs need W >= 32).
MIN_IO_WIDTH = 32

#: On-chip SRAM: weights beyond about 32 MB spill to DRAM (ane-knowledge.md §2 rule 18).
SRAM_BYTES = 32 * 2**20

#: Matmul-like outputs above this saturate to inf on the ANE, about fp16 max / 2 (M2 Pro,
#: M5; aneforge docs/numeric-cliffs.md, prior-art.md §1.7).
MATMUL_SATURATION = 32752.0

#: rsqrt/log inputs (plus epsilon) below this return ±inf on the ANE (libane
#: docs/graph-ir.md, prior-art.md §1.8).
SMALL_LOG_INPUT = 7.63e-6

#: Before A16, a slice at a non-zero offset of the last axis saturates values above this
#: magnitude (ane-knowledge.md §2.1 rule 7).
WIDTH_SLICE_LIMIT = 4094.0

#: Longest axis the ANE compiler takes (ane-knowledge.md §2.2 rule 13).
AXIS_LIMIT = 65536

#: Packages above these sizes run entirely on the CPU/GPU (prior-art.md §1.1,
#: ane-knowledge.md §2.3 rule 19).
MACOS_PACKAGE_LIMIT = 2 * 2**30
IOS_PACKAGE_LIMIT = 1 * 2**30

#: Programs with fewer matmul/conv layers, or whose largest tensor has fewer elements,
#: stay on the CPU (ane-knowledge.md §2.2 rule 12).
MIN_LAYERS = 3
MIN_ELEMENTS = 64

#: Convolution kernels this wide or wider fail to compile on the ANE (ane-knowledge.md
#: §2.2 rule 15).
KERNEL_WIDTH_LIMIT = 16


__all__ = [
    "ATTENTION_SCORE_LIMIT",
    "AXIS_LIMIT",
    "FP16_MAX",
    "FP16_TINY",
    "IOS_PACKAGE_LIMIT",
    "KERNEL_WIDTH_LIMIT",
    "MACOS_PACKAGE_LIMIT",
    "MASK_FILL",
    "MATMUL_SATURATION",
    "MIN_ELEMENTS",
    "MIN_IO_WIDTH",
    "MIN_LAYERS",
    "SMALL_LOG_INPUT",
    "SRAM_BYTES",
    "WIDTH_SLICE_LIMIT",
]

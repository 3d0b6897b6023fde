"""Checks for the ANE's known numeric cliffs, run on every simulated op.

Each check looks at one op, its inputs and its output statistics and returns
``(rule, message)`` pairs; rule ids and sources are in :data:`report.RULES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from anekit.ops.attention import per_head_elements, score_producer
from anekit.ops.groups import MATMUL_LIKE
from anekit.ops.limits import ATTENTION_SCORE_LIMIT, MATMUL_SATURATION

#: Below this, log/rsqrt inputs return ±inf on the ANE.
SMALL_LOG_INPUT = 7.63e-6
#: Pre-A16 width-offset slices saturate above this magnitude.
WIDTH_SLICE_LIMIT = 4094.0

Finding = tuple[str, str]


def check(op: Any, inputs: Mapping[str, Any], max_abs: float) -> list[Finding]:
    """The cliff rules that fire on ``op``."""
    findings: list[Finding] = []
    op_type = op.op_type
    if op_type in MATMUL_LIKE and max_abs > MATMUL_SATURATION:
        findings.append(
            (
                "ane.matmul_saturation",
                f"output reaches {max_abs:.6g}, above {MATMUL_SATURATION:g} "
                "where ANE matmuls saturate to inf",
            )
        )
    if op_type in ("rsqrt", "log") and "x" in inputs:
        shifted = np.asarray(inputs["x"], np.float32) + np.float32(inputs.get("epsilon") or 0.0)
        smallest = float(np.nanmin(shifted)) if shifted.size else 0.0
        if smallest < SMALL_LOG_INPUT:
            findings.append(
                (
                    "ane.small_log_input",
                    f"input (plus epsilon) goes down to {smallest:.3g}, below {SMALL_LOG_INPUT:g} "
                    "where the ANE returns ±inf",
                )
            )
    if op_type == "softmax":
        producer = score_producer(op.inputs["x"])
        if producer is not None:
            shape = tuple(int(dim) for dim in producer.outputs[0].shape)
            elements = per_head_elements(producer)
            if elements >= ATTENTION_SCORE_LIMIT:
                findings.append(
                    (
                        "ane.attention_score_size",
                        f"scores from {producer.name} have {elements} elements per head "
                        f"(shape {shape}), at least 2^20",
                    )
                )
    if op_type == "scaled_dot_product_attention" and "query" in inputs and "key" in inputs:
        elements = int(np.shape(inputs["query"])[-2]) * int(np.shape(inputs["key"])[-2])
        if elements >= ATTENTION_SCORE_LIMIT:
            findings.append(
                (
                    "ane.attention_score_size",
                    f"per-head score tensor has {elements} elements, at least 2^20",
                )
            )
    if op_type in ("slice_by_index", "slice_by_size") and "begin" in inputs and "x" in inputs:
        begin = np.asarray(inputs["begin"]).reshape(-1)
        if begin.size and int(begin[-1]) != 0:
            peak = (
                float(np.nanmax(np.abs(np.asarray(inputs["x"], np.float32))))
                if np.size(inputs["x"])
                else 0.0
            )
            if peak > WIDTH_SLICE_LIMIT:
                findings.append(
                    (
                        "ane.width_slice_saturation",
                        f"slices the last axis at offset {int(begin[-1])} "
                        f"of values up to {peak:.6g}; "
                        f"pre-A16 ANEs saturate above {WIDTH_SLICE_LIMIT:g}",
                    )
                )
    return findings

"""Which matmul feeds a softmax: the attention-score heuristic shared by the ANE
passes, the simulator's cliff rules and the placement analysis."""

from __future__ import annotations

from typing import Any

import numpy as np

from anekit._milgraph import static_shape
from anekit.ops.groups import SCORE_PATH, SCORE_PRODUCERS
from anekit.ops.limits import ATTENTION_SCORE_LIMIT


def score_producer(var: Any, depth: int = 6) -> Any:
    """The matmul or einsum whose scores reach ``var`` through elementwise ops, if any."""
    op = var.op
    for _ in range(depth):
        if op is None:
            return None
        if op.op_type in SCORE_PRODUCERS:
            return op
        if op.op_type not in SCORE_PATH:
            return None
        upstream = [
            value
            for value in op.inputs.values()
            if hasattr(value, "op") and value.op is not None and value.rank >= 2
        ]
        if not upstream:
            return None
        op = max(upstream, key=lambda value: value.rank).op
    return None


def per_head_elements(producer: Any) -> int:
    """Score elements per head: a matmul's last two axes (..., queries, keys); for an
    einsum (the ANE layout splits heads into separate einsums), all but the batch axis."""
    shape = [int(dim) for dim in producer.outputs[0].shape]
    if producer.op_type == "einsum":
        return int(np.prod(shape[1:], dtype=np.int64))
    return shape[-1] * shape[-2] if len(shape) >= 2 else int(np.prod(shape, dtype=np.int64))


def oversized_scores(softmax: Any) -> tuple[Any, int] | None:
    """(score producer, elements per head) when the scores a softmax reads reach
    :data:`~anekit.ops.limits.ATTENTION_SCORE_LIMIT` (hazard ``attention.score_size``),
    else None (no producer found, or a flexible score shape)."""
    producer = score_producer(softmax.inputs["x"])
    if producer is None or static_shape(producer.outputs[0]) is None:
        return None
    elements = per_head_elements(producer)
    return (producer, elements) if elements >= ATTENTION_SCORE_LIMIT else None


__all__ = ["oversized_scores", "per_head_elements", "score_producer"]

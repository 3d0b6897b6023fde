"""Attention passes: ``ane::prescale_query`` and ``ane::attention_split``.

Both find attention as MIL writes it: ``scores = matmul(q, k)``, optional
elementwise ops (scale, mask), ``softmax`` over the keys, ``matmul(weights, v)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from coremltools.converters.mil.mil import Builder as mb
from coremltools.converters.mil.mil.passes.pass_registry import register_pass

from anekit._milgraph import static_shape
from anekit.ops.attention import score_producer
from anekit.ops.groups import ARITHMETIC, LAYOUT, PROJECTIONS
from anekit.ops.limits import ATTENTION_SCORE_LIMIT
from anekit.passes.base import AnePass
from anekit.passes.graph import consumers, float_dtype, is_output, replace_var, scalar_value


@dataclass
class Attention:
    """One attention: the score matmul, the ops up to the softmax, and the output matmul."""

    scores: Any
    between: list[Any]
    softmax: Any
    output: Any | None


def find_attention(function: Any) -> list[Attention]:
    """Every softmax whose input is a matmul through elementwise ops (one reader each)."""
    found = []
    for op in function.operations:
        if op.op_type != "softmax":
            continue
        between: list[Any] = []  # the ops between the score matmul and the softmax
        var = op.inputs["x"]
        while var.op is not None and var.op.op_type in ARITHMETIC:
            operands = [var.op.inputs["x"], var.op.inputs["y"]]
            # the operand the scores come through (a mask may be computed at run time too)
            chain = [item for item in operands if score_producer(item) is not None]
            if len(chain) != 1 or len(consumers(var)) != 1 or is_output(var, function):
                break
            between.insert(0, var.op)
            var = chain[0]
        if var.op is None or var.op.op_type != "matmul":
            continue
        if len(consumers(var)) != 1 or is_output(var, function):
            continue
        readers = consumers(op.outputs[0])
        output = (
            readers[0]
            if len(readers) == 1
            and readers[0].op_type == "matmul"
            and readers[0].inputs["x"] is op.outputs[0]
            and not readers[0].inputs["transpose_x"].val
            else None
        )
        found.append(Attention(var.op, between, op, output))
    return found


def _scale_of(attention: Attention) -> float | None:
    """The constant scalar the first op after the score matmul multiplies the scores by
    (mul s, or real_div 1/s)."""
    if not attention.between:
        return None
    op, scores = attention.between[0], attention.scores.outputs[0]
    scalar = scalar_value(op.inputs["y"] if op.inputs["x"] is scores else op.inputs["x"])
    if op.op_type == "mul":
        return scalar
    if op.op_type == "real_div" and op.inputs["x"] is scores and scalar:
        return 1.0 / scalar
    return None


def _projection(var: Any) -> Any | None:
    """The linear/conv with constant weights that ``var`` comes from through layout
    ops that nobody else reads."""
    # through the layout ops between a query's projection and the scores
    while var.op is not None and var.op.op_type in LAYOUT:
        if len(consumers(var)) != 1:
            return None
        var = var.op.inputs["x"]
    op = var.op
    if op is None or op.op_type not in PROJECTIONS or len(consumers(var)) != 1:
        return None
    constants = [op.inputs[name] for name in ("weight", "bias") if name in op.inputs]
    return op if all(constant.val is not None for constant in constants) else None


@register_pass(namespace="ane")
class prescale_query(AnePass):
    """softmax(q @ k * s) -> softmax((q * s) @ k), s folded into q's projection.

    Scaling the scores after the matmul lets q·k overflow fp16 first (|q·k| > 65504);
    scaling the query keeps it in range. The scale goes into the query projection's
    weights and bias when q comes straight from one, else onto q itself.
    ``logit_clamp`` (off by default) clips the scores to [-c, c] before the softmax.
    """

    logit_clamp: float | None = None

    def rewrite(self, function: Any) -> None:
        for attention in find_attention(function):
            scale = _scale_of(attention)
            if scale is None:
                self._clamp(function, attention)
                continue
            scores_op, first = attention.scores, attention.between[0]
            query = scores_op.inputs["x"]
            folded = self._fold(function, query, scale)
            if folded is None:
                dtype = float_dtype(query)
                folded = mb.mul(
                    x=query, y=dtype.type(scale), before_op=scores_op, name=f"{query.name}_scaled"
                )
                how = "query multiplied"
            else:
                how = "folded into the query projection"
            scores = mb.matmul(
                x=folded,
                y=scores_op.inputs["y"],
                transpose_x=bool(scores_op.inputs["transpose_x"].val),
                transpose_y=bool(scores_op.inputs["transpose_y"].val),
                before_op=first,
                name=f"{scores_op.name}_prescaled",
            )
            replace_var(function, first, first.outputs[0], scores)
            self.changed(scores_op, f"score scale {scale:.6g} {how}")
            self._clamp(function, attention)

    def _fold(self, function: Any, query: Any, scale: float) -> Any | None:
        projection = _projection(query)
        if projection is None:
            return None
        inputs: dict[str, Any] = dict(projection.inputs)
        for name in ("weight", "bias"):  # both constants (_projection checked)
            if name in inputs:
                value = np.asarray(inputs[name].val)
                inputs[name] = (value * scale).astype(value.dtype)
        builder = getattr(mb, projection.op_type)
        scaled = builder(**inputs, before_op=projection, name=f"{projection.name}_prescaled")
        replace_var(function, projection, projection.outputs[0], scaled)
        return query  # now computed from the scaled projection

    def _clamp(self, function: Any, attention: Attention) -> None:
        if self.logit_clamp is None:
            return
        softmax = attention.softmax
        scores = softmax.inputs["x"]
        limit = float(self.logit_clamp)
        dtype = float_dtype(scores)
        clipped = mb.clip(
            x=scores,
            alpha=dtype.type(-limit),
            beta=dtype.type(limit),
            before_op=softmax,
            name=f"{softmax.name}_clamped_scores",
        )
        weights = mb.softmax(
            x=clipped,
            axis=softmax.inputs["axis"].val,
            before_op=softmax,
            name=f"{softmax.name}_clamped",
        )
        replace_var(function, softmax, softmax.outputs[0], weights)
        self.changed(softmax, f"scores clamped to [-{limit:g}, {limit:g}]")


def _slice(var: Any, axis: int, start: int, stop: int, before: Any, name: str) -> Any:
    begin = [0] * var.rank
    end = [int(dim) for dim in var.shape]
    begin[axis], end[axis] = start, stop
    return mb.slice_by_index(x=var, begin=begin, end=end, before_op=before, name=name)


@register_pass(namespace="ane")
class attention_split(AnePass):
    """Per-head scores of 2^20 elements or more -> the same attention in query-row pieces."""

    def rewrite(self, function: Any) -> None:
        for attention in find_attention(function):
            self._split(function, attention)

    def _split(self, function: Any, attention: Attention) -> None:
        scores_op, softmax = attention.scores, attention.softmax
        shape = static_shape(scores_op.outputs[0])
        if shape is None or len(shape) < 2:
            return
        queries, keys = shape[-2], shape[-1]
        if queries * keys < ATTENTION_SCORE_LIMIT:
            return
        rank = len(shape)
        if int(softmax.inputs["axis"].val) % rank != rank - 1 or attention.output is None:
            self.note(f"{softmax.name}: {queries}x{keys} scores left whole (unrecognised form)")
            return
        if scores_op.inputs["transpose_x"].val:
            self.note(f"{softmax.name}: transposed query left whole")
            return
        most = max(1, (ATTENTION_SCORE_LIMIT - 1) // keys)  # rows per piece below the limit
        count = -(-queries // most)
        rows = -(-queries // count)  # as even as possible
        output = attention.output
        pieces = []
        for start in range(0, queries, rows):
            stop = min(start + rows, queries)
            piece = f"{softmax.name}_rows{start}"
            q = _slice(scores_op.inputs["x"], rank - 2, start, stop, output, f"{piece}_q")
            part = mb.matmul(
                x=q,
                y=scores_op.inputs["y"],
                transpose_y=bool(scores_op.inputs["transpose_y"].val),
                before_op=output,
                name=f"{piece}_scores",
            )
            previous = scores_op.outputs[0]
            for op in attention.between:
                chain_is_x = op.inputs["x"] is previous
                other = op.inputs["y"] if chain_is_x else op.inputs["x"]
                if other.rank >= 2 and other.shape[-2] == queries and queries > 1:
                    other = _slice(other, other.rank - 2, start, stop, output, f"{piece}_{op.name}")
                operands = {"x": part, "y": other} if chain_is_x else {"x": other, "y": part}
                builder = getattr(mb, op.op_type)
                part = builder(**operands, before_op=output, name=f"{piece}_{op.name}_out")
                previous = op.outputs[0]
            weights = mb.softmax(x=part, axis=-1, before_op=output, name=f"{piece}_weights")
            pieces.append(
                mb.matmul(
                    x=weights,
                    y=output.inputs["y"],
                    transpose_y=bool(output.inputs["transpose_y"].val),
                    before_op=output,
                    name=f"{piece}_out",
                )
            )
        joined = mb.concat(
            values=pieces, axis=rank - 2, before_op=output, name=f"{output.name}_split"
        )
        replace_var(function, output, output.outputs[0], joined)
        self.changed(
            softmax,
            f"{queries}x{keys} scores per head split into {len(pieces)} pieces of <= {rows} rows",
        )

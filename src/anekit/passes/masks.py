"""``ane::finite_masks``: additive masks with finite fills, and no fully masked softmax row.

A mask filled with ``-inf`` or ``finfo(float32).min`` becomes ``-inf`` in fp16, and a
softmax row whose keys are all ``-inf`` is 0/0 = NaN (prior-art.md §1.3; eeane
``masks.py``). Apple's recipe uses -1e4 (ane-knowledge.md §2.1 rule 5), which
composes (several masks add up to -2e4, still finite) and gives exp(-1e4) = 0 in
fp32, so unmasked rows compute exactly what they did.

The pass:

- in every constant that reaches a softmax's input through mask arithmetic (add,
  mul, select, casts and reshapes), replaces values at or below -3e4 (``-inf``,
  fp16's -65504, fp32's minimum) with -1e4; other constants are left alone;
- in a constant mask added to softmax scores, opens the first key of any row whose
  keys are all masked (the row then attends to key 0 instead of producing NaN);
- clamps a mask that arrives at run time (a function input, possibly reshaped or
  cast) to >= -1e4 with ``maximum`` before it reaches the scores.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from coremltools.converters.mil.mil import Builder as mb
from coremltools.converters.mil.mil.passes.pass_registry import register_pass

from anekit.ops.attention import score_producer
from anekit.ops.groups import MASK_CARRIERS, MASK_PATH
from anekit.ops.limits import MASK_FILL
from anekit.passes.base import AnePass
from anekit.passes.graph import float_dtype, ops_of_type, replace_var

#: Constant values at or below this are "minus infinity" fills.
FILL_THRESHOLD = -3e4


def _softmax_masks(function: Any) -> list[tuple[Any, Any, int]]:
    """(add op, mask operand, softmax axis in the add's output) for each softmax whose
    input is scores + mask."""
    found = []
    for op in ops_of_type(function, "softmax"):
        add = op.inputs["x"].op
        if add is None or add.op_type != "add":
            continue
        x, y = add.inputs["x"], add.inputs["y"]
        scores_x, scores_y = score_producer(x) is not None, score_producer(y) is not None
        if scores_x == scores_y:
            continue
        mask = y if scores_x else x
        axis = int(op.inputs["axis"].val) % add.outputs[0].rank
        found.append((add, mask, axis))
    return found


def _reaches_softmax(var: Any, depth: int = 8) -> bool:
    """True when ``var`` flows into a softmax through mask arithmetic only."""
    frontier, seen = [var], set()
    for _ in range(depth):
        following = []
        for item in frontier:
            for reader in item.child_ops:
                if reader.op_type == "softmax":
                    return True
                if reader.op_type in MASK_PATH and id(reader) not in seen:
                    seen.add(id(reader))
                    following.extend(reader.outputs)
        frontier = following
    return False


def _from_input(var: Any, function: Any) -> bool:
    inputs = set(map(id, function.inputs.values()))
    while var.op is not None and var.op.op_type in MASK_CARRIERS:
        var = var.op.inputs["x"]
    return id(var) in inputs


@register_pass(namespace="ane")
class finite_masks(AnePass):
    """-inf / finfo.min fills -> -1e4; fully masked rows keep one key open."""

    def rewrite(self, function: Any) -> None:
        for op in ops_of_type(function, "const"):
            array = np.asarray(op.outputs[0].val)  # of dtype object when there is no value
            if array.dtype.kind != "f":
                continue
            fills = array <= FILL_THRESHOLD
            if not fills.any() or not _reaches_softmax(op.outputs[0]):
                continue
            finite = np.where(fills, MASK_FILL, array).astype(array.dtype)
            new = mb.const(val=finite, before_op=op, name=f"{op.name}_finite")
            replace_var(function, op, op.outputs[0], new)
            self.changed(op, f"{int(fills.sum())} fill value(s) <= {FILL_THRESHOLD:g} -> -1e4")
        for add, mask, axis in _softmax_masks(function):
            if mask.val is not None:
                self._open_one_key(function, add, mask, axis)
            elif _from_input(mask, function):
                clamped = mb.maximum(
                    x=mask,
                    y=float_dtype(mask).type(MASK_FILL),
                    before_op=add,
                    name=f"{add.name}_mask_finite",
                )
                self._replace_mask(function, add, mask, clamped)
                self.changed(add, "mask given at run time clamped to >= -1e4")

    def _open_one_key(self, function: Any, add: Any, mask: Any, axis: int) -> None:
        value = np.asarray(mask.val)
        offset = len(add.outputs[0].shape) - value.ndim
        if axis < offset or value.shape[axis - offset] == 1:
            return  # the mask does not vary along the keys
        keys = axis - offset
        closed = (value <= MASK_FILL / 2).all(axis=keys, keepdims=True)
        if not closed.any():
            return
        opened = value.copy()
        first = np.zeros_like(opened, dtype=bool)
        np.put_along_axis(first, np.zeros(closed.shape, np.intp), True, axis=keys)
        opened[first & np.broadcast_to(closed, opened.shape)] = 0
        new = mb.const(val=opened, before_op=add, name=f"{add.name}_mask_open")
        self._replace_mask(function, add, mask, new)
        self.changed(add, f"{int(closed.sum())} fully masked row(s) keep key 0 open")

    @staticmethod
    def _replace_mask(function: Any, add: Any, mask: Any, new_mask: Any) -> None:
        """scores + mask -> scores + new_mask (addition commutes; shapes are unchanged)."""
        scores = add.inputs["y"] if add.inputs["x"] is mask else add.inputs["x"]
        summed = mb.add(x=scores, y=new_mask, before_op=add, name=f"{add.name}_masked")
        replace_var(function, add, add.outputs[0], summed)

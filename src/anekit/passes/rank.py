"""``ane::rank5_to_rank4``: fold rank-5 reshape/transpose chains to rank 4.

A rank-5 intermediate (the Hugging Face QKV split ``view(B, S, 3, H, D)``) makes the
ANE compiler fail for batch > 1 and the whole model falls back (prior-art.md §1.2).
Such tensors usually live in ``reshape -> transpose -> reshape`` chains; folding a
singleton axis, or two input axes that every transpose keeps adjacent and in order,
gives the same elements in the same order at rank 4. Chains of another shape are
left alone and noted.
"""

from __future__ import annotations

from typing import Any

from coremltools.converters.mil.mil import Builder as mb
from coremltools.converters.mil.mil.passes.pass_registry import register_pass

from anekit._milgraph import static_shape
from anekit.passes.base import AnePass
from anekit.passes.graph import consumers, is_output, replace_var


def _adjacent(perm: list[int], axis: int) -> bool:
    """Input axes ``axis`` and ``axis + 1`` stay adjacent and in order through ``perm``."""
    return any(perm[j] == axis and perm[j + 1] == axis + 1 for j in range(len(perm) - 1))


def _plan(op: Any, function: Any) -> list[tuple[Any, list[int] | None]] | None:
    """The readers of a rank-5 reshape, if every one is foldable: (op, transpose perm)."""
    out = op.outputs[0]
    if is_output(out, function) or not consumers(out):
        return None
    plan: list[tuple[Any, list[int] | None]] = []
    for reader in consumers(out):
        if reader.op_type == "reshape" and len(reader.outputs[0].shape) <= 4:
            plan.append((reader, None))
            continue
        if reader.op_type != "transpose" or reader.inputs["perm"].val is None:
            return None
        transposed = reader.outputs[0]
        if is_output(transposed, function) or not all(
            after.op_type == "reshape" and len(after.outputs[0].shape) <= 4
            for after in consumers(transposed)
        ):
            return None
        plan.append((reader, [int(axis) for axis in reader.inputs["perm"].val]))
    return plan


def _fold(shape: tuple[int, ...], perms: list[list[int]]) -> tuple[int, bool] | None:
    """An axis to fold: a singleton to drop (True), or the first of a pair to merge."""
    for axis, dim in enumerate(shape):
        if dim == 1:
            return axis, True
    for axis in range(len(shape) - 1):
        if all(_adjacent(perm, axis) for perm in perms):
            return axis, False
    return None


def _new_perm(perm: list[int], axis: int, drop: bool) -> list[int]:
    removed = axis if drop else axis + 1  # a dropped axis, or the second of a merged pair
    return [p - (p > axis) for p in perm if p != removed]


@register_pass(namespace="ane")
class rank5_to_rank4(AnePass):
    """reshape(rank 5) -> transpose -> reshape  =>  the same at rank 4."""

    def rewrite(self, function: Any) -> None:
        for op in list(function.operations):
            if op.op_type != "reshape" or op not in function.operations:
                continue
            shape = static_shape(op.outputs[0])
            if shape is None or len(shape) != 5:
                continue
            plan = _plan(op, function)
            fold = None if plan is None else _fold(shape, [p for _, p in plan if p is not None])
            if plan is None or fold is None:
                self.note(f"{op.name}: rank-5 {shape} left as is (no foldable reshape chain)")
                continue
            axis, drop = fold
            merged = (
                shape[:axis] + shape[axis + 1 :]
                if drop
                else (*shape[:axis], shape[axis] * shape[axis + 1], *shape[axis + 2 :])
            )
            rank4 = mb.reshape(
                x=op.inputs["x"], shape=list(merged), before_op=op, name=f"{op.name}_rank4"
            )
            for reader, perm in plan:
                if perm is None:
                    continue
                moved = mb.transpose(
                    x=rank4,
                    perm=_new_perm(perm, axis, drop),
                    before_op=reader,
                    name=f"{reader.name}_rank4",
                )
                replace_var(function, reader, reader.outputs[0], moved, same_type=False)
                function.remove_ops([reader])
            replace_var(function, op, op.outputs[0], rank4, same_type=False)
            how = f"dropped axis {axis}" if drop else f"merged axes {axis} and {axis + 1}"
            self.changed(op, f"rank-5 {shape} -> rank-4 {merged} ({how})")

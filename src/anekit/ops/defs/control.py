"""Control flow (``cond``, ``while_loop``) and the list ops that go with it.

A MIL list is an immutable :class:`ListValue` here: each list op returns a new list, as
each returns a new Var in MIL (coremltools ``mil/ops/defs/iOS15/control_flow.py``).
Elements never written read as zeros of the element shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from anekit.errors import ProgramError
from anekit.ops.registry import OpContext, register

#: A ``while_loop`` that runs longer than this is reported instead of hanging the run.
MAX_ITERATIONS = 1_000_000

_DTYPES = {"fp16": np.float32, "fp32": np.float32, "int32": np.int32, "bool": np.bool_}


@dataclass(frozen=True)
class ListValue:
    """The value of a MIL list: its elements, and whether writes past the end grow it."""

    items: tuple[np.ndarray, ...]
    dynamic: bool


def _blocks(ctx: OpContext) -> tuple[Any, Any]:
    assert ctx.run_block is not None
    return ctx.op.blocks, ctx.run_block


@register("cond")
def cond(ctx: OpContext, pred: Any) -> Any:
    """The true block's outputs if ``pred``, else the false block's."""
    blocks, run_block = _blocks(ctx)
    return tuple(run_block(blocks[0 if bool(np.asarray(pred)) else 1], []))


@register("while_loop")
def while_loop(ctx: OpContext, loop_vars: Any) -> Any:
    """The body block applied to ``loop_vars`` while the cond block says so."""
    (condition, body), run_block = _blocks(ctx)
    values = list(loop_vars)
    for _ in range(MAX_ITERATIONS):
        if not bool(np.asarray(run_block(condition, values)[0])):
            return tuple(values)
        values = run_block(body, values)
    raise ProgramError(f"while_loop {ctx.op.name!r} ran {MAX_ITERATIONS} iterations")


@register("make_list")
def make_list(
    ctx: OpContext, elem_shape: Any, init_length: Any, dynamic_length: Any, dtype: Any
) -> Any:
    shape = tuple(int(np.asarray(dim)) for dim in elem_shape)
    zeros: np.ndarray = np.zeros(shape, _DTYPES[str(dtype)])
    return ListValue((zeros,) * int(init_length), bool(dynamic_length))


def _written(ctx: OpContext, ls: ListValue, writes: dict[int, Any]) -> ListValue:
    """``ls`` with ``writes`` (index -> value) applied, grown if the list is dynamic."""
    length = max([len(ls.items), *(index + 1 for index in writes)])
    if length > len(ls.items) and not ls.dynamic:
        raise ProgramError(f"{ctx.op.name}: index {length - 1} past a list of {len(ls.items)}")
    items = [*ls.items, *[None] * (length - len(ls.items))]
    for index, value in writes.items():
        items[index] = np.asarray(value)
    filler = np.zeros_like(next(item for item in items if item is not None))
    return ListValue(tuple(filler if item is None else item for item in items), ls.dynamic)


@register("list_write")
def list_write(ctx: OpContext, ls: Any, index: Any, value: Any) -> Any:
    return _written(ctx, ls, {int(index): value})


@register("list_scatter")
def list_scatter(ctx: OpContext, ls: Any, indices: Any, value: Any) -> Any:
    return _written(ctx, ls, {int(i): v for i, v in zip(np.ravel(indices), value, strict=True)})


@register("list_read")
def list_read(ctx: OpContext, ls: Any, index: Any) -> Any:
    return ls.items[int(index)]


@register("list_gather")
def list_gather(ctx: OpContext, ls: Any, indices: Any) -> Any:
    return np.stack([ls.items[int(i)] for i in np.ravel(indices)])


@register("list_length")
def list_length(ctx: OpContext, ls: Any) -> Any:
    return np.int32(len(ls.items))

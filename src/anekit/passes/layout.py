"""Fewer transposes after ``to_bc1s``: carry whole regions in (B, C, S).

``to_bc1s`` wraps every 1x1 convolution in transposes between (B, S, C) and
(B, C, S) (``perm=[0, 2, 1]``; for (S, C) activations ``[1, 0]``): "flips", each its
own inverse. Two rewrites remove most of them:

1. **Head reshapes.** ``reshape(T(y), (B, S, H, D))`` equals
   ``transpose(reshape(y, (B, H, D, S)), [0, 3, 1, 2])``, and ``T(reshape(z,
   (B, S, C)))`` for ``z`` of shape (B, S, H, D) equals ``reshape(transpose(z,
   [0, 2, 3, 1]), (B, C, S))``: the transpose then merges with the attention's own
   head transpose.
2. **Layout regions.** Ops that work in either layout (elementwise ops,
   ``layer_norm``, ``softmax``, reductions with ``keep_dims``) form connected
   regions with the transposes between them. Each rank-3 tensor of a region gets a
   parity (flipped across each transpose); choosing which parity is stored as
   (B, C, S) removes every transpose inside the region and needs one only where the
   region meets other ops. A region is rewritten when that is fewer transposes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from coremltools.converters.mil.mil import Builder as mb
from coremltools.converters.mil.mil import types

from anekit._milgraph import static_shape
from anekit.ops.groups import FLOAT_BINARY, LAYOUT_REDUCTIONS, UNARY_ELEMENTWISE
from anekit.passes.graph import is_output, ops_of_type, replace_var


def _flippable(var: Any) -> bool:
    """A float tensor of rank 2 (S, C) or 3 (B, S, C) with a static shape."""
    shape = static_shape(var)
    return (
        shape is not None
        and len(shape) in (2, 3)
        and types.is_tensor(var.sym_type)
        and var.dtype in (types.fp16, types.fp32)
    )


def _swapped(rank: int) -> tuple[int, ...]:
    """The permutation that swaps the last two axes of a rank-``rank`` tensor."""
    return (*range(rank - 2), rank - 1, rank - 2)


def _flip_axis(axis: int, rank: int) -> int:
    return _swapped(rank)[int(axis) % rank]


def is_flip(op: Any) -> bool:
    """A transpose swapping the last two axes of a rank-2 or rank-3 tensor."""
    if op.op_type != "transpose" or not _flippable(op.outputs[0]):
        return False
    perm = op.inputs["perm"].val
    rank = op.outputs[0].rank
    return perm is not None and tuple(int(axis) % rank for axis in perm) == _swapped(rank)


def _data_inputs(op: Any) -> list[Any]:
    """The rank-3 tensors an op computes on (not constants or parameters)."""
    keys = ("x", "y") if op.op_type in FLOAT_BINARY else ("x",)
    return [op.inputs[key] for key in keys if key in op.inputs and op.inputs[key].val is None]


def flexible(op: Any) -> bool:
    """True when ``op`` computes the same thing in (B, S, C) and (B, C, S), given remapped
    axes and transposed constants."""
    if is_flip(op):
        return True
    if len(op.outputs) != 1 or not _flippable(op.outputs[0]):
        return False
    shape = static_shape(op.outputs[0])
    data = _data_inputs(op)
    if not data or any(not _flippable(var) or static_shape(var) != shape for var in data):
        return False
    if op.op_type in UNARY_ELEMENTWISE:
        return True
    if op.op_type in FLOAT_BINARY:
        rank = op.outputs[0].rank
        return all(var.val is None or np.ndim(var.val) <= rank for var in (op.x, op.y))
    if op.op_type == "layer_norm":
        axes = op.inputs["axes"].val
        return axes is not None and (
            len(axes) == 1 or not any(key in op.inputs for key in ("gamma", "beta"))
        )
    if op.op_type == "softmax":
        return op.inputs["axis"].val is not None
    if op.op_type in LAYOUT_REDUCTIONS:
        keep = op.inputs.get("keep_dims")
        return keep is not None and bool(keep.val) and op.inputs["axes"].val is not None
    return False


@dataclass
class Region:
    """Rank-3 tensors joined by flexible ops, each with a parity."""

    parity: dict[int, int] = field(default_factory=dict)
    vars: dict[int, Any] = field(default_factory=dict)
    ops: list[Any] = field(default_factory=list)
    consistent: bool = True


def _regions(function: Any) -> Iterator[Region]:
    """The layout regions of ``function`` (union of flexible ops by shared tensors)."""
    flexible_ops = [op for op in function.operations if flexible(op)]
    edges: dict[int, list[tuple[Any, int]]] = {}
    known: dict[int, Any] = {}
    for op in flexible_ops:
        out = op.outputs[0]
        known[id(out)] = out
        flip = 1 if is_flip(op) else 0
        for var in _data_inputs(op):
            known[id(var)] = var
            edges.setdefault(id(out), []).append((var, flip))
            edges.setdefault(id(var), []).append((out, flip))
    seen: set[int] = set()
    for start in list(known):
        if start in seen:
            continue
        region = Region(parity={start: 0})
        stack = [start]
        seen.add(start)
        while stack:
            current = stack.pop()
            region.vars[current] = known[current]
            for neighbour, flip in edges.get(current, []):
                expected = region.parity[current] ^ flip
                key = id(neighbour)
                if key in region.parity:
                    region.consistent &= region.parity[key] == expected
                    continue
                region.parity[key] = expected
                seen.add(key)
                stack.append(key)
        region.ops = [op for op in flexible_ops if id(op.outputs[0]) in region.vars]
        yield region


def _boundary_cost(region: Region, flipped: dict[int, bool], function: Any) -> int:
    """Transposes the region needs at its edges when ``flipped`` tensors are stored (B, C, S)."""
    cost = 0
    inside = {id(op) for op in region.ops}
    for key, var in region.vars.items():
        if not flipped[key]:
            continue
        if var.op is None or id(var.op) not in inside:
            cost += 1  # made outside: transpose it on the way in (outside readers keep it)
        elif is_output(var, function) or any(id(op) not in inside for op in var.child_ops):
            cost += 1  # made inside, read outside: transpose it back once
    return cost


def _transposed_constant(value: Any, rank: int) -> np.ndarray:
    array = np.asarray(value)
    if array.ndim == 0:
        return array
    return np.swapaxes(array.reshape((1,) * (rank - array.ndim) + array.shape), -1, -2)


def _rebuild(op: Any, physical: dict[int, Any], flipped: bool) -> Any:
    """``op`` again, reading the stored tensors, with axes and constants remapped when
    its tensors are stored (B, C, S)."""
    inputs = {name: physical.get(id(var), var) for name, var in op.inputs.items()}
    if flipped:
        rank = op.outputs[0].rank
        if op.op_type in FLOAT_BINARY:
            for key in ("x", "y"):
                if op.inputs[key].val is not None:
                    inputs[key] = _transposed_constant(op.inputs[key].val, rank).astype(
                        np.asarray(op.inputs[key].val).dtype
                    )
        elif op.op_type in ("layer_norm", *LAYOUT_REDUCTIONS):
            axes = [_flip_axis(axis, rank) for axis in op.inputs["axes"].val]
            inputs["axes"] = np.array(axes, np.int32)
        elif op.op_type == "softmax":
            inputs["axis"] = np.int32(_flip_axis(op.inputs["axis"].val, rank))
    builder = getattr(mb, op.op_type)
    return builder(**inputs, before_op=op, name=f"{op.name}_bcs")


def _rewrite(region: Region, flipped: dict[int, bool], function: Any) -> None:
    inside = {id(op) for op in region.ops}
    order = {id(op): index for index, op in enumerate(function.operations)}
    physical: dict[int, Any] = {}
    # tensors made outside the region but stored flipped: one transpose in each
    for key, var in region.vars.items():
        if flipped[key] and (var.op is None or id(var.op) not in inside):
            reader = min(
                (op for op in var.child_ops if id(op) in inside), key=lambda op: order[id(op)]
            )
            physical[key] = mb.transpose(
                x=var, perm=list(_swapped(var.rank)), before_op=reader, name=f"{var.name}_bcs_in"
            )
    for op in [op for op in function.operations if id(op) in inside]:
        out = op.outputs[0]
        if is_flip(op):
            source = op.inputs["x"]
            physical[id(out)] = physical.get(id(source), source)
            continue
        if flipped[id(out)] or any(id(var) in physical for var in op.inputs.values()):
            physical[id(out)] = _rebuild(op, physical, flipped[id(out)])
    # readers outside the region get the tensor they expect
    handovers = []
    order = {id(op): index for index, op in enumerate(function.operations)}
    for key, var in region.vars.items():
        if key not in physical or var.op is None or id(var.op) not in inside:
            continue  # made outside: its outside readers still read it as it was
        outside = [op for op in var.child_ops if id(op) not in inside]
        if not outside and not is_output(var, function):
            continue
        stored = physical[key]
        if flipped[key]:
            first = min(outside, key=lambda op: order[id(op)]) if outside else None
            stored = mb.transpose(  # before_op=None: at the end of the function
                x=stored, perm=list(_swapped(var.rank)), before_op=first, name=f"{var.name}_bsc_out"
            )
        handovers.append((var, stored, outside))
    operations = list(function.operations)
    position = {id(op): index for index, op in enumerate(operations)}
    for var, stored, outside in handovers:
        for reader in outside:
            index = position[id(reader)]
            function.replace_uses_of_var_after_op(
                anchor_op=operations[index - 1] if index else None,
                end_op=reader,
                old_var=var,
                new_var=stored,
            )
        if is_output(var, function):
            replace_var(function, operations[-1], var, stored)


def carry_regions(function: Any) -> None:
    """Rewrite each region that ends up with fewer transposes."""
    for region in list(_regions(function)):
        if not region.consistent or not region.ops:
            continue
        current = sum(1 for op in region.ops if is_flip(op))
        if current == 0:
            continue
        # store the tensors of parity 0, or those of parity 1, as (B, C, S): the cheaper
        options = [
            {key: bool(parity ^ choice) for key, parity in region.parity.items()}
            for choice in (0, 1)
        ]
        costs = [_boundary_cost(region, flipped, function) for flipped in options]
        if min(costs) < current:
            _rewrite(region, options[costs.index(min(costs))], function)


def fold_head_reshapes(function: Any) -> None:
    """The two head-reshape identities of the module docstring."""
    for op in ops_of_type(function, "reshape", "transpose"):
        source = op.inputs["x"].op
        if op.op_type == "reshape" and source is not None and is_flip(source):
            _split_heads(function, op, source)
        elif is_flip(op) and source is not None and source.op_type == "reshape":
            _merge_heads(function, op, source)


def _split_heads(function: Any, reshape: Any, flip: Any) -> None:
    y = flip.inputs["x"]  # (B, C, S)
    source, target = static_shape(y), static_shape(reshape.outputs[0])
    if source is None or target is None or len(source) != 3 or len(target) != 4:
        return
    batch, channels, sequence = source
    if target[0] != batch or target[1] != sequence or target[2] * target[3] != channels:
        return
    heads, depth = target[2], target[3]
    grouped = mb.reshape(
        x=y, shape=[batch, heads, depth, sequence], before_op=reshape, name=f"{reshape.name}_bhds"
    )
    moved = mb.transpose(
        x=grouped, perm=[0, 3, 1, 2], before_op=reshape, name=f"{reshape.name}_bshd"
    )
    replace_var(function, reshape, reshape.outputs[0], moved)


def _merge_heads(function: Any, flip: Any, reshape: Any) -> None:
    z = reshape.inputs["x"]  # (B, S, H, D)
    source, target = static_shape(z), static_shape(reshape.outputs[0])
    if source is None or target is None or len(source) != 4 or len(target) != 3:
        return
    batch, sequence, heads, depth = source
    if target != (batch, sequence, heads * depth):
        return
    moved = mb.transpose(x=z, perm=[0, 2, 3, 1], before_op=flip, name=f"{flip.name}_bhds")
    merged = mb.reshape(
        x=moved, shape=[batch, heads * depth, sequence], before_op=flip, name=f"{flip.name}_bcs"
    )
    replace_var(function, flip, flip.outputs[0], merged)

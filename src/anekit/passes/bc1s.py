"""``ane::to_bc1s``: linear layers as 1x1 convolutions on (B, C, 1, S).

The ANE is built around convolution and wants activations as (B, C, 1, S):
channels on axis 1, the sequence last (ane-knowledge.md §3.1-3.2; Apple's
ml-ane-transformers). ``linear`` and ``matmul`` with a constant weight on a
(B, S, C) or (S, C) activation become

    transpose -> (B, C, 1, S) -> conv(weight[:, :, None, None]) -> (B, C', S) -> transpose

and coremltools' transpose reduction (``common::reduce_transposes``) then pushes the
inserted transposes through elementwise ops, reductions, ``layer_norm`` and
``softmax`` (anekit teaches it the last two, with their axes remapped) and cancels
the pairs that meet. What cannot be cancelled (around reshapes into attention
heads, typically) stays; the report counts it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from coremltools.converters.mil.mil import Builder as mb
from coremltools.converters.mil.mil import types
from coremltools.converters.mil.mil.passes.defs import optimize_repeat_ops as _repeat
from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY, register_pass

from anekit._milgraph import static_shape
from anekit.passes.base import AnePass
from anekit.passes.graph import replace_var

#: coremltools passes run after the rewrite, in order, to cancel and merge transposes.
CLEANUP = (
    "common::reduce_transposes",
    "common::merge_consecutive_transposes",
    "common::noop_elimination",
    "common::dead_code_elimination",
)


class _PushThroughAxisOp(_repeat.TransformAxisUpdateOps):  # type: ignore[misc]
    """Lets a transpose pass through an op with an ``axis``/``axes`` input by remapping it:
    op[axes](transpose(x)) == transpose(op[perm[axes]](x))."""

    name = "axes"

    def can_transpose_pass(self) -> bool:
        var = self.op.inputs.get(self.name)
        if var is None or var.val is None:
            return False
        if self.op.op_type == "layer_norm":
            # gamma/beta are shaped like the normalized axes: only one axis keeps them valid
            axes = np.atleast_1d(var.val)
            return len(axes) == 1 or not any(k in self.op.inputs for k in ("gamma", "beta"))
        return True

    def update(self) -> None:
        var = self.op.inputs[self.name]
        rank = len(self.transpose_axes)
        value = np.asarray(var.val)
        mapped = np.vectorize(lambda axis: self.transpose_axes[int(axis) % rank])(value)
        new_value = mapped.astype(np.int32) if value.ndim else np.int32(mapped)
        with self.op.enclosing_block:
            new_var = mb.const(
                val=new_value, before_op=self.op, name=f"{self.op.name}_{self.name}_moved"
            )
        self.op.enclosing_block.replace_uses_of_var_after_op(
            anchor_op=new_var.op,
            end_op=self.op,
            old_var=var,
            new_var=new_var,
            no_check_var_types=True,
        )


class _PushThroughLayerNorm(_PushThroughAxisOp):
    name = "axes"


class _PushThroughSoftmax(_PushThroughAxisOp):
    name = "axis"


for _op_type, _handler in (("layer_norm", _PushThroughLayerNorm), ("softmax", _PushThroughSoftmax)):
    if _op_type not in _repeat._TransposeOptimization._AXIS_UPDATE_OPS:
        _repeat._TransposeOptimization._AXIS_UPDATE_OPS[_op_type] = _handler


def _linear_parts(op: Any) -> tuple[Any, np.ndarray, np.ndarray | None] | None:
    """(activation, weight (C_out, C_in), bias) of a linear or constant-weight matmul."""
    if op.op_type == "linear":
        weight, bias = op.inputs["weight"].val, op.inputs.get("bias")
        if weight is None or (bias is not None and bias.val is None):
            return None
        return op.inputs["x"], np.asarray(weight), None if bias is None else np.asarray(bias.val)
    if op.op_type == "matmul":
        y = op.inputs["y"].val
        if (
            y is None
            or np.ndim(y) != 2
            or op.inputs["transpose_x"].val
            or op.inputs["x"].val is not None
        ):
            return None
        weight = np.asarray(y) if op.inputs["transpose_y"].val else np.asarray(y).T
        return op.inputs["x"], weight, None
    return None


def _drop_squeeze_expand_pairs(function: Any) -> None:
    """expand_dims(squeeze(t, axes), axes) -> t: what two adjacent convs leave."""
    for op in list(function.operations):
        if op.op_type != "expand_dims":
            continue
        squeeze = op.inputs["x"].op
        if squeeze is None or squeeze.op_type != "squeeze":
            continue
        axes, squeezed = op.inputs["axes"].val, squeeze.inputs.get("axes")
        if axes is None or squeezed is None or squeezed.val is None:
            continue
        if list(np.atleast_1d(axes)) == list(np.atleast_1d(squeezed.val)):
            replace_var(function, op, op.outputs[0], squeeze.inputs["x"])


def _count(function: Any, op_type: str) -> int:
    return sum(1 for op in function.operations if op.op_type == op_type)


@register_pass(namespace="ane")
class to_bc1s(AnePass):
    """linear/matmul with constant weights on (B, S, C) -> 1x1 conv on (B, C, 1, S)."""

    def __init__(self) -> None:
        super().__init__()
        #: New kernels that take over their weight's name once the old constant is gone.
        self._renames: list[tuple[Any, str]] = []

    def apply(self, prog: Any) -> None:
        before = {name: _count(f, "transpose") for name, f in prog.functions.items()}
        super().apply(prog)
        if not self.result.changed:
            return
        for name in CLEANUP:
            PASS_REGISTRY[name](prog)
        for function in prog.functions.values():
            with function:
                _drop_squeeze_expand_pairs(function)
        PASS_REGISTRY["common::dead_code_elimination"](prog)
        taken = {
            var.name for f in prog.functions.values() for op in f.operations for var in op.outputs
        }
        for kernel, name in self._renames:
            if name not in taken:  # the weights keep the names users gave them
                kernel.name = kernel.op.name = name
                taken.add(name)
        for name, function in prog.functions.items():
            left = _count(function, "transpose")
            self.note(
                f"function {name}: {left} transpose(s) left after cancelling "
                f"({before[name]} before the rewrite)"
            )

    def rewrite(self, function: Any) -> None:
        for op in list(function.operations):
            parts = _linear_parts(op)
            if parts is None:
                continue
            x, weight, bias = parts
            shape = static_shape(x)
            if shape is None or len(shape) not in (2, 3) or weight.ndim != 2:
                continue
            if shape[-1] != weight.shape[1] or np.asarray(weight).dtype.kind != "f":
                continue
            dtype = weight.dtype
            kernel = weight[:, :, None, None].astype(dtype)
            if len(shape) == 3:
                channels_first = mb.transpose(
                    x=x, perm=[0, 2, 1], before_op=op, name=f"{op.name}_bcs"
                )
                image = mb.expand_dims(
                    x=channels_first, axes=[2], before_op=op, name=f"{op.name}_bc1s"
                )
            else:
                channels_first = mb.transpose(x=x, perm=[1, 0], before_op=op, name=f"{op.name}_cs")
                image = mb.reshape(
                    x=channels_first,
                    shape=[1, shape[1], 1, shape[0]],
                    before_op=op,
                    name=f"{op.name}_bc1s",
                )
            weight_var = op.inputs["weight"] if op.op_type == "linear" else op.inputs["y"]
            kernel_var = mb.const(val=kernel, before_op=op, name=f"{weight_var.name}_1x1")
            self._renames.append((kernel_var, weight_var.name))
            inputs: dict[str, Any] = {"x": image, "weight": kernel_var}
            if bias is not None:
                inputs["bias"] = bias.astype(dtype)
            conv = mb.conv(**inputs, before_op=op, name=f"{op.name}_conv1x1")
            if len(shape) == 3:
                back = mb.squeeze(x=conv, axes=[2], before_op=op, name=f"{op.name}_bcs_out")
                result = mb.transpose(x=back, perm=[0, 2, 1], before_op=op, name=f"{op.name}_bsc")
            else:
                back = mb.reshape(
                    x=conv,
                    shape=[weight.shape[0], shape[0]],
                    before_op=op,
                    name=f"{op.name}_cs_out",
                )
                result = mb.transpose(x=back, perm=[1, 0], before_op=op, name=f"{op.name}_bsc")
            replace_var(function, op, op.outputs[0], result)
            self.changed(op, f"{op.op_type} {shape} -> 1x1 conv on (B, C, 1, S)")
        if self.result.changed:
            self._enter_layout_once(function)

    @staticmethod
    def _enter_layout_once(function: Any) -> None:
        """Give each (B, S, C) input a transpose pair, x -> T -> T^-1, so that the
        transpose reduction can carry the activations in (B, C, S) from the start
        instead of transposing before every layer (the pair merges away if not)."""
        first = function.operations[0] if function.operations else None
        for var in list(function.inputs.values()):
            shape = static_shape(var)
            if first is None or shape is None or len(shape) != 3 or not var.child_ops:
                continue
            if var.dtype not in (types.fp16, types.fp32):
                continue
            name = var.name
            inward = mb.transpose(x=var, perm=[0, 2, 1], before_op=first, name=f"{name}_bcs")
            back = mb.transpose(x=inward, perm=[0, 2, 1], before_op=first, name=f"{name}_bsc")
            function.replace_uses_of_var_after_op(anchor_op=back.op, old_var=var, new_var=back)

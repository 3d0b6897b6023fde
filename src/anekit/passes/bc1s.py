"""``ane::to_bc1s``: linear layers as 1x1 convolutions on (B, C, 1, S).

The ANE is built around convolution and wants activations as (B, C, 1, S):
channels on axis 1, the sequence last (ane-knowledge.md §3.1-3.2; Apple's
ml-ane-transformers). ``linear`` and ``matmul`` with a constant weight on a
(B, S, C) or (S, C) activation become

    transpose -> (B, C, 1, S) -> conv(weight[:, :, None, None]) -> (B, C', S) -> transpose

Then :mod:`anekit.passes.layout` removes most of those transposes: it folds them
into the attention's head reshapes and carries whole regions of elementwise ops,
``layer_norm`` and ``softmax`` in (B, C, S); coremltools merges what is left
(``common::merge_consecutive_transposes``). The report counts the transposes that
remain.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from coremltools.converters.mil.mil import Builder as mb
from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY, register_pass

from anekit._milgraph import static_shape
from anekit.passes.base import AnePass
from anekit.passes.graph import ops_of_type, replace_var
from anekit.passes.layout import carry_regions, fold_head_reshapes

#: coremltools passes run after the rewrite, in order, to cancel and merge transposes.
CLEANUP = (
    "common::merge_consecutive_transposes",
    "common::noop_elimination",
    "common::dead_code_elimination",
)


def _linear_parts(op: Any) -> tuple[Any, np.ndarray, np.ndarray | None] | None:
    """(activation, weight (C_out, C_in), bias) of a linear or constant-weight matmul."""
    if op.op_type == "linear":
        weight, bias = op.inputs["weight"].val, op.inputs.get("bias")
        if weight is None or (bias is not None and bias.val is None):
            return None
        return op.inputs["x"], np.asarray(weight), None if bias is None else np.asarray(bias.val)
    if op.op_type == "matmul":
        y = op.inputs["y"].val
        if y is None or np.ndim(y) != 2:
            return None
        if op.inputs["transpose_x"].val or op.inputs["x"].val is not None:
            return None
        weight = np.asarray(y) if op.inputs["transpose_y"].val else np.asarray(y).T
        return op.inputs["x"], weight, None
    return None


def _drop_squeeze_expand_pairs(function: Any) -> None:
    """expand_dims(squeeze(t, axes), axes) -> t: what two adjacent convs leave."""
    for op in ops_of_type(function, "expand_dims"):
        squeeze = op.inputs["x"].op
        if squeeze is None or squeeze.op_type != "squeeze":
            continue
        axes, squeezed = op.inputs["axes"].val, squeeze.inputs.get("axes")
        if axes is None or squeezed is None or squeezed.val is None:
            continue
        if list(np.atleast_1d(axes)) == list(np.atleast_1d(squeezed.val)):
            replace_var(function, op, op.outputs[0], squeeze.inputs["x"])


def _cleanup(prog: Any) -> None:
    for name in CLEANUP:
        PASS_REGISTRY[name](prog)


@register_pass(namespace="ane")
class to_bc1s(AnePass):
    """linear/matmul with constant weights on (B, S, C) -> 1x1 conv on (B, C, 1, S)."""

    def __init__(self) -> None:
        super().__init__()
        #: New kernels that take over their weight's name once the old constant is gone.
        self._renames: list[tuple[Any, str]] = []

    def apply(self, prog: Any) -> None:
        before = {name: len(ops_of_type(f, "transpose")) for name, f in prog.functions.items()}
        super().apply(prog)
        if not self.result.changed:
            return
        for function in prog.functions.values():
            for step in (fold_head_reshapes, carry_regions):
                with function:
                    step(function)
                _cleanup(prog)
            with function:
                _drop_squeeze_expand_pairs(function)
        _cleanup(prog)
        taken = {
            var.name for f in prog.functions.values() for op in f.operations for var in op.outputs
        }
        for kernel, name in self._renames:
            if name not in taken:  # the weights keep the names users gave them
                kernel.name = kernel.op.name = name
                taken.add(name)
        for name, function in prog.functions.items():
            left = len(ops_of_type(function, "transpose"))
            self.note(
                f"function {name}: {left} transpose(s) left ({before[name]} before the rewrite)"
            )

    def rewrite(self, function: Any) -> None:
        entries: dict[int, Any] = {}
        kernels: dict[int, Any] = {}
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
            if id(x) in entries:  # q, k and v read the same activation: enter once
                image = entries[id(x)]
            elif len(shape) == 3:
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
            entries[id(x)] = image
            weight_var = op.inputs["weight"] if op.op_type == "linear" else op.inputs["y"]
            kernel_var = kernels.get(id(weight_var))
            if kernel_var is None:  # one kernel per weight, however many layers share it
                kernel_var = mb.const(val=kernel, before_op=op, name=f"{weight_var.name}_1x1")
                kernels[id(weight_var)] = kernel_var
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

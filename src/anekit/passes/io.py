"""``ane::pad_io_width``: inputs and outputs whose last axis holds at least 32 values.

The ANE pads the last axis of a tensor to 64 bytes, and runtime inputs narrower
than 32 fp16 values compile but return garbage or fail (ane-knowledge.md §2.2
rules 10-11; SKY's SP=32 constraint). The pass widens each such function input to
32 (the program slices the original columns back out first thing) and pads each
such output with zeros. ``CompiledProgram`` hides this from callers: it pads
inputs and slices outputs (its ``io_widths``), and saved packages record the
original widths in their metadata.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from coremltools.converters.mil.mil import Builder as mb
from coremltools.converters.mil.mil import types
from coremltools.converters.mil.mil.passes.pass_registry import register_pass
from coremltools.converters.mil.mil.program import Placeholder

from anekit._milgraph import numpy_dtype, static_shape
from anekit.ops.limits import MIN_IO_WIDTH
from anekit.passes.base import AnePass
from anekit.passes.graph import replace_var


def _narrow(var: Any) -> tuple[int, ...] | None:
    """The shape of a tensor whose last axis holds fewer than 32 values, else None."""
    shape = static_shape(var)
    return shape if types.is_tensor(var.sym_type) and shape and shape[-1] < MIN_IO_WIDTH else None


@register_pass(namespace="ane")
class pad_io_width(AnePass):
    """I/O last axis < 32 -> padded to 32 (inputs sliced back, outputs zero-padded)."""

    def rewrite(self, function: Any) -> None:
        for name, var in list(function.inputs.items()):
            shape = _narrow(var)
            if shape and var.child_ops:
                self._pad_input(function, name, var, shape)
        for var in list(function.outputs):
            shape = _narrow(var)
            if shape and var.op is not None:
                self._pad_output(function, var, shape)

    def _pad_input(self, function: Any, name: str, var: Any, shape: tuple[int, ...]) -> None:
        wide = Placeholder((*shape[:-1], MIN_IO_WIDTH), dtype=var.dtype, name=name)
        wide.set_name(name)
        function.placeholder_inputs[name] = wide
        function._input_dict[name] = wide.outputs[0]
        first = function.operations[0]
        narrow = mb.slice_by_index(
            x=wide.outputs[0],
            begin=[0] * len(shape),
            end=list(shape),
            before_op=first,
            name=f"{name}_unpadded",
        )
        replace_var(function, narrow.op, var, narrow)
        self.result.changes.append(
            f"input {name}: last axis {shape[-1]} padded to {MIN_IO_WIDTH} (sliced back inside)"
        )

    def _pad_output(self, function: Any, var: Any, shape: tuple[int, ...]) -> None:
        # concat with zeros, not ``pad``: pad is disputed on the ANE (op table)
        zeros = np.zeros((*shape[:-1], MIN_IO_WIDTH - shape[-1]), numpy_dtype(var))
        padded = mb.concat(  # appended at the end of the function
            values=[var, zeros], axis=len(shape) - 1, name=f"{var.name}_padded"
        )
        name = var.name
        replace_var(function, padded.op, var, padded)
        var.name, padded.name = f"{name}_unpadded", name  # the output keeps its name
        self.result.changes.append(
            f"output {name}: last axis {shape[-1]} zero-padded to {MIN_IO_WIDTH}"
        )

"""``ane::no_tile``: replace ``tile`` by broadcasting.

``tile`` is disputed on the ANE (SKY: a program with tile poisons every later
evaluation in the process; ane-knowledge.md §7.1), and anekit's op table keeps it
off the ANE. A tile that only repeats singleton axes is a broadcast: readers that
broadcast anyway (elementwise ops whose other operand has the full shape) read
the untiled tensor; other readers get ``add(x, zeros)``, an elementwise broadcast.
A tile that repeats a non-singleton axis is left alone and noted.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from coremltools.converters.mil.mil import Builder as mb
from coremltools.converters.mil.mil.passes.pass_registry import register_pass

from anekit._milgraph import static_shape
from anekit.ops.groups import BINARY_ELEMENTWISE
from anekit.passes.base import AnePass
from anekit.passes.graph import consumers, float_dtype, is_output, ops_of_type, replace_var

#: Largest zeros constant no_tile adds for a reader that does not broadcast itself.
MAX_ZEROS_ELEMENTS = 1 << 20


def _broadcasts_in_place(reader: Any, tiled: Any, small: tuple[int, ...]) -> bool:
    """True when ``reader`` gives the same output reading ``small`` for ``tiled``."""
    if reader.op_type not in BINARY_ELEMENTWISE:
        return False
    others = [var for var in (reader.inputs.get("x"), reader.inputs.get("y")) if var is not tiled]
    if len(others) != 1:
        return False
    other, full = static_shape(others[0]), static_shape(tiled)
    if other is None or full is None:
        return False
    try:
        return np.broadcast_shapes(other, small) == np.broadcast_shapes(other, full)
    except ValueError:
        return False


@register_pass(namespace="ane")
class no_tile(AnePass):
    """tile of singleton axes -> broadcasting."""

    def rewrite(self, function: Any) -> None:
        for op in ops_of_type(function, "tile"):
            x, tiled = op.inputs["x"], op.outputs[0]
            reps = op.inputs["reps"].val
            small, full = static_shape(x), static_shape(tiled)
            if reps is None or small is None or full is None:
                self.note(f"{op.name}: tile with run-time repeats or shapes left as is")
                continue
            if any(int(rep) != 1 and dim != 1 for rep, dim in zip(reps, small, strict=True)):
                self.note(f"{op.name}: tile repeats a non-singleton axis; left as is")
                continue
            if not is_output(tiled, function) and all(
                _broadcasts_in_place(reader, tiled, small) for reader in consumers(tiled)
            ):
                replace_var(function, op, tiled, x, same_type=False)
                self.changed(op, f"readers broadcast {small} themselves")
                continue
            if int(np.prod(full)) > MAX_ZEROS_ELEMENTS or x.dtype != tiled.dtype:
                self.note(f"{op.name}: tile to {full} left as is (too large to broadcast)")
                continue
            zeros = np.zeros(full, float_dtype(tiled))
            broadcast = mb.add(x=x, y=zeros, before_op=op, name=f"{op.name}_broadcast")
            replace_var(function, op, tiled, broadcast)
            self.changed(op, f"add(x, zeros{full}) broadcasts {small}")

"""``ane::gelu_tanh`` (off by default): exact GELU -> its tanh approximation.

Not exact: the tanh form differs from erf-GELU by up to about 5e-4 absolute. Turn
it on when the model was trained with the tanh approximation but exported as exact
GELU, or to check whether the ANE's GELU lookup table (prior-art.md §1.8: about
0.08 relative error on an M1 probe) is what hurts accuracy, by comparing both.
"""

from __future__ import annotations

from typing import Any

from coremltools.converters.mil.mil import Builder as mb
from coremltools.converters.mil.mil.passes.pass_registry import register_pass

from anekit.passes.base import AnePass
from anekit.passes.graph import ops_of_type, replace_var


@register_pass(namespace="ane")
class gelu_tanh(AnePass):
    """gelu(mode=EXACT) -> gelu(mode=TANH_APPROXIMATION)."""

    default = False

    def rewrite(self, function: Any) -> None:
        for op in ops_of_type(function, "gelu"):
            if op.inputs["mode"].val != "EXACT":
                continue
            approximate = mb.gelu(
                x=op.inputs["x"], mode="TANH_APPROXIMATION", before_op=op, name=f"{op.name}_tanh"
            )
            replace_var(function, op, op.outputs[0], approximate)
            self.changed(op, "exact GELU -> tanh approximation")

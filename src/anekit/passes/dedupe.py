"""``ane::dedupe``: one op for each computation written twice.

NumPy code repeats itself without cost to the reader: ``(x - m) / np.sqrt(((x - m)
* (x - m)).mean() + eps)`` traces to three ``sub`` ops, and ``np.var`` recomputes
the mean its caller already took. The pattern passes after this one (above all
``fp16_safe_norm``) recognise a computation by the identity of its values, so
duplicates must be merged first. This runs coremltools' own common-subexpression
pass, ``common::remove_redundant_ops`` (two ops of one type whose inputs are the
same vars, or constants of equal value, give one), then drops what it orphaned.
Bit-identical: a merged op computed exactly what it replaces. Random ops and ops
that produce a function output are never merged (coremltools' rules).
"""

from __future__ import annotations

from typing import Any

from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY, register_pass

from anekit.passes.base import AnePass
from anekit.passes.graph import remove_dead_code


@register_pass(namespace="ane")
class dedupe(AnePass):
    """Merge ops that compute the same thing from the same inputs."""

    def apply(self, prog: Any) -> None:
        remove_dead_code(prog)  # so that only merged ops are counted below
        before = {
            op.name: op
            for function in prog.functions.values()
            for op in function.operations
            if op.op_type != "const"
        }
        PASS_REGISTRY["common::remove_redundant_ops"](prog)
        remove_dead_code(prog)
        after = {op.name for function in prog.functions.values() for op in function.operations}
        for name, op in before.items():
            if name not in after:
                self.changed(op, "the same op on the same inputs as an earlier one: merged")

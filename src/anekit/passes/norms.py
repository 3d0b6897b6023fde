"""``ane::fp16_safe_norm``: normalizations whose squares cannot overflow fp16.

Squaring activations for a variance overflows fp16 once a deviation exceeds 256
(256² > 65504): semlith's LayerNorm did on the ANE, and the fix was to square a
sixty-fourth of the input (shared/seeds/000); coremltools lowers torch's RMSNorm
with a max-abs pre-scale for the same reason (ane-knowledge.md §2.1 rule 3).
Normalizations are scale-invariant, so the pass computes every one of them as

    layer_norm(x * 2^-k, epsilon = eps * 2^-2k)      (k = 3 by default: 1/8)

which is exact in fp16 arithmetic (a power-of-two scale only moves the exponent)
and lets the squared deviations and their sum grow 2^2k = 64 times larger before
they overflow (384 channels: an RMS deviation of 104 instead of 13). It rewrites,
up to rounding:

- ``layer_norm`` ops;
- hand-written LayerNorm, ``d / sqrt(mean(d²) + eps)`` with ``d = x - mean(x)``;
- hand-written RMSNorm, ``v / sqrt(mean(v²) + eps)`` (also ``v * rsqrt(...)``,
  ``v * (1 / sqrt(...))``, ``sum(v²) / n``, ``square``, ``pow(v, 2)``), as
  ``layer_norm(concat([v, -v]))``'s first half: the doubled tensor has mean 0 and
  variance mean(v²) (Anemll's QwenRMSNorm).

Why 1/8 and not semlith's 1/64: a larger scale pushes the variance of quiet rows
into fp16's subnormal range, and the scaled epsilon with it. Measured on
all-MiniLM-L6-v2 (tests/passes, docs/passes.md): k = 6 dropped the fp32-simulated
cosine to torch from 0.9999999 to 0.99982; k = 3 keeps 0.9999999.

fp16 cannot hold an epsilon below 2^-24 (6e-8): the scaled epsilon is raised to at
least that, so the effective epsilon in the input's units is at least 2^-24 * 2^2k
(3.8e-6 for k = 3), and an epsilon such as BERT's 1e-12 that would be 0 in fp16 is
raised in any case. Both are noted in the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from coremltools.converters.mil.mil import Builder as mb
from coremltools.converters.mil.mil.passes.pass_registry import register_pass

from anekit.passes.base import AnePass
from anekit.passes.graph import consumers, float_dtype, is_output, replace_var

#: fp16's smallest positive value: an epsilon below it is 0 in fp16.
FP16_TINY = 2.0**-24
#: Default pre-scale exponent: inputs are multiplied by 2^-3 = 1/8 (see the module doc).
SCALE_EXPONENT = 3
#: Name suffix of the pre-scaled layer_norm, so that a second run leaves it alone.
_MARK = "_fp16safe"


@dataclass
class _Norm:
    """A matched normalization: ``target`` computes ``v / sqrt(mean(v²) + eps)``."""

    target: Any
    v: Any
    axes: list[int]
    eps: float


def _only_reader(var: Any, function: Any) -> Any | None:
    readers = consumers(var)
    if len(readers) != 1 or is_output(var, function):
        return None
    return readers[0]


def _scalar(var: Any) -> float | None:
    value = var.val
    if value is None or np.size(value) != 1:
        return None
    return float(np.asarray(value).reshape(()))


def _square_of(var: Any) -> Any | None:
    """``v`` when ``var`` is v*v, square(v) or pow(v, 2)."""
    op = var.op
    if op is None:
        return None
    if op.op_type == "mul" and op.inputs["x"] is op.inputs["y"]:
        return op.inputs["x"]
    if op.op_type == "square":
        return op.inputs["x"]
    if op.op_type == "pow" and _scalar(op.inputs["y"]) == 2.0:
        return op.inputs["x"]
    return None


def _mean_square(var: Any, function: Any) -> tuple[Any, list[int]] | None:
    """(v, axes) when ``var`` is mean(v²) over ``axes`` with keep_dims."""
    op = var.op
    if op is None:
        return None
    count_scale = 1.0
    if op.op_type in ("mul", "real_div"):
        reduce = next((item for item in (op.inputs["x"], op.inputs["y"]) if item.val is None), None)
        constant = op.inputs["y"] if reduce is op.inputs["x"] else op.inputs["x"]
        factor = _scalar(constant)
        if reduce is None or factor is None or reduce.op is None:
            return None
        if op.op_type == "real_div":
            if constant is not op.inputs["y"] or factor == 0:
                return None
            factor = 1.0 / factor
        if reduce.op.op_type != "reduce_sum" or _only_reader(reduce, function) is None:
            return None
        count_scale, op = factor, reduce.op
    if op.op_type not in ("reduce_mean", "reduce_sum") or not op.inputs["keep_dims"].val:
        return None
    squared = op.inputs["x"]
    v = _square_of(squared)
    if v is None or _only_reader(squared, function) is None or op.inputs["axes"].val is None:
        return None
    rank = v.rank
    axes = sorted(int(axis) % rank for axis in op.inputs["axes"].val)
    try:
        count = int(np.prod([int(v.shape[axis]) for axis in axes]))
    except TypeError:
        return None
    expected = 1.0 if op.op_type == "reduce_mean" else 1.0 / count
    if not np.isclose(count_scale, expected, rtol=1e-3):
        return None
    return v, axes


def _reciprocal_root(op: Any) -> bool:
    """``op`` is rsqrt(...) or 1 / sqrt(...)."""
    if op.op_type == "rsqrt":
        return True
    if op.op_type != "real_div" or _scalar(op.inputs["x"]) != 1.0:
        return False
    root = op.inputs["y"].op
    return root is not None and root.op_type == "sqrt"


def _match(op: Any, function: Any) -> _Norm | None:
    """``op`` as v / sqrt(mean(v²) + eps) or v * rsqrt(mean(v²) + eps)."""
    if op.op_type == "real_div":
        v, denominator = op.inputs["x"], op.inputs["y"]
        root = denominator.op
        if root is None or root.op_type != "sqrt":
            return None
        inner, extra_eps = root.inputs["x"], 0.0
    elif op.op_type == "mul":
        pairs = ((op.inputs["x"], op.inputs["y"]), (op.inputs["y"], op.inputs["x"]))
        found = [(a, b.op) for a, b in pairs if b.op is not None and _reciprocal_root(b.op)]
        if not found:
            return None
        v, reciprocal = found[0]
        if reciprocal.op_type == "rsqrt":
            root = reciprocal
            inner, extra_eps = root.inputs["x"], float(root.inputs["epsilon"].val or 0.0)
        else:  # 1 / sqrt(...)
            if _only_reader(reciprocal.outputs[0], function) is None:
                return None
            root = reciprocal.inputs["y"].op
            inner, extra_eps = root.inputs["x"], 0.0
    else:
        return None
    if _only_reader(root.outputs[0], function) is None:
        return None
    eps = extra_eps
    if inner.op is not None and inner.op.op_type == "add":
        add = inner.op
        for candidate, constant in (
            (add.inputs["x"], add.inputs["y"]),
            (add.inputs["y"], add.inputs["x"]),
        ):
            value = _scalar(constant)
            if value is not None and candidate.val is None:
                if _only_reader(inner, function) is None:
                    return None
                inner, eps = candidate, eps + value
                break
    if _only_reader(inner, function) is None:
        return None
    mean_square = _mean_square(inner, function)
    if mean_square is None or mean_square[0] is not v:
        return None
    return _Norm(op, v, mean_square[1], eps)


def _centred(v: Any, axes: list[int]) -> Any | None:
    """``x`` when ``v`` is x - mean(x) over the same axes."""
    op = v.op
    if op is None or op.op_type != "sub":
        return None
    x, mean = op.inputs["x"], op.inputs["y"]
    reduce = mean.op
    if reduce is None or reduce.op_type != "reduce_mean" or reduce.inputs["x"] is not x:
        return None
    if not reduce.inputs["keep_dims"].val or reduce.inputs["axes"].val is None:
        return None
    if sorted(int(axis) % x.rank for axis in reduce.inputs["axes"].val) != axes:
        return None
    return x


@register_pass(namespace="ane")
class fp16_safe_norm(AnePass):
    """Normalizations -> layer_norm(x * 2^-k) with a scaled epsilon."""

    #: The pre-scale exponent k (0 keeps inputs unscaled and only raises epsilons).
    scale_exponent: int = SCALE_EXPONENT

    def rewrite(self, function: Any) -> None:
        for op in list(function.operations):
            if op.op_type == "layer_norm":
                if not op.name.endswith(_MARK):
                    self._layer_norm(function, op)
                continue
            norm = _match(op, function)
            if norm is None:
                continue
            x = _centred(norm.v, norm.axes)
            if x is not None:
                result = self._safe(op, x, norm.axes, norm.eps, {}, f"{op.name}_ln")
                replace_var(function, op, op.outputs[0], result)
                self.changed(op, f"(x - mean) / sqrt(var + eps) over {norm.axes} -> {self._what}")
                continue
            dtype = float_dtype(norm.v)
            axis = norm.axes[-1]
            negated = mb.mul(x=norm.v, y=dtype.type(-1), before_op=op, name=f"{op.name}_neg")
            doubled = mb.concat(
                values=[norm.v, negated], axis=axis, before_op=op, name=f"{op.name}_doubled"
            )
            normed = self._safe(op, doubled, norm.axes, norm.eps, {}, f"{op.name}_rms_ln")
            end = [int(dim) for dim in doubled.shape]
            end[axis] = int(norm.v.shape[axis])
            result = mb.slice_by_index(
                x=normed, begin=[0] * norm.v.rank, end=end, before_op=op, name=f"{op.name}_rms"
            )
            replace_var(function, op, op.outputs[0], result)
            self.changed(
                op, f"v / sqrt(mean(v²) + eps) over {norm.axes} -> {self._what} of concat([v, -v])"
            )

    @property
    def _what(self) -> str:
        return f"layer_norm(x * 2^-{self.scale_exponent})" if self.scale_exponent else "layer_norm"

    def _layer_norm(self, function: Any, op: Any) -> None:
        epsilon = op.inputs.get("epsilon")
        eps = 1e-5 if epsilon is None else _scalar(epsilon)
        if eps is None or op.inputs.get("axes") is None or op.inputs["axes"].val is None:
            return
        if not self.scale_exponent and eps >= FP16_TINY:
            return
        affine = {name: op.inputs[name] for name in ("gamma", "beta") if name in op.inputs}
        axes = [int(axis) for axis in op.inputs["axes"].val]
        result = self._safe(op, op.inputs["x"], axes, eps, affine, op.name)
        replace_var(function, op, op.outputs[0], result)
        self.changed(op, f"layer_norm -> {self._what}")

    def _safe(
        self, op: Any, x: Any, axes: list[int], eps: float, affine: dict[str, Any], name: str
    ) -> Any:
        """layer_norm(x * 2^-k, eps * 2^-2k), the scaled epsilon at least fp16's tiniest."""
        dtype = float_dtype(x)
        k = self.scale_exponent
        scaled_eps = eps * 2.0 ** (-2 * k)
        if scaled_eps < FP16_TINY:
            effective = FP16_TINY * 2.0 ** (2 * k)
            self.note(
                f"{op.name}: epsilon {eps:g} "
                + (f"scaled by 2^-{2 * k} " if k else "")
                + f"is below fp16's smallest value; the effective epsilon is {effective:.3g}"
            )
            scaled_eps = FP16_TINY
        if k:
            x = mb.mul(x=x, y=dtype.type(2.0**-k), before_op=op, name=f"{name}_prescale")
        return mb.layer_norm(
            x=x,
            axes=axes,
            epsilon=dtype.type(scaled_eps),
            before_op=op,
            name=f"{name}{_MARK}",
            **affine,
        )

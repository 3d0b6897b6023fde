"""``ane::fp16_safe_norm``: normalizations whose squares cannot overflow fp16.

Squaring activations for a variance overflows fp16 once a deviation exceeds 256
(256² > 65504), and the sum of the squares over 384 channels once their RMS exceeds
13; the variance itself is not representable in fp16 once the RMS exceeds 256,
which residual streams of language models routinely carry. The result is silent
garbage: ``x / sqrt(inf)`` is all zeros (semlith's LayerNorm on the ANE, seed 000).
A fixed pre-scale only moves the limit (1/8 held to an RMS of 104 over 384
channels), so this pass divides by each row's own largest magnitude at run time,
as coremltools lowers torch's RMSNorm (frontend/torch/ops.py ``rms_norm``; Anemll).
Two rewrites:

- **Roots of mean squares**, however they are written: ``sqrt`` or ``rsqrt`` of
  ``mean(v²)``, ``sum(v²)``, ``sum(v²) / n`` or ``sum(v²) * c``, plus an optional
  epsilon, with ``v²`` as ``v * v``, ``square(v)``, ``pow(v, 2)`` or
  ``reduce_sum_square``; and ``reduce_l2_norm``. This covers hand-written LayerNorm
  and RMSNorm, ``np.var``, ``np.std``, ``np.linalg.norm`` and l2-normalize. With
  ``a = max(max|v|, floor)`` over the reduced axes::

      sqrt(mean(v²) + eps)  ->  a * sqrt(mean((v / a)²) + (sqrt(eps) / a)²)

  exact up to fp16 rounding for every row: ``|v / a| <= 1``, so no square, sum or
  root can overflow, quiet rows are scaled *up* (their variance no longer falls
  into fp16's subnormals), and the epsilon is scaled per row to match. ``rsqrt``
  becomes ``1 / (a * sqrt(...))``: the ANE returns inf for rsqrt inputs below
  7.6e-6 (libane), and rsqrt's placement is disputed (docs/op-support.md).
- **``layer_norm`` ops** stay one op (the ANE runs it natively)::

      layer_norm(x, eps)  ->  layer_norm(x / max(max|x|, 2^k), eps * 2^-2k)

  Rows whose largest magnitude is at most 2^k (k = 3: 8) are scaled by exactly
  2^-k with the epsilon scaled to match, as before; louder rows by their own
  maximum, so nothing overflows, but their epsilon is in effect ``eps *
  (max|x| / 2^k)²``: the row's scale changes by a relative ``eps * (max|x| /
  2^k)² / (2 var)`` at most, below fp16's resolution unless the row's variance is
  tiny next to its largest value (tested, docs/passes.md). A layer_norm's epsilon
  is a constant, so a per-row epsilon would take the op apart.

Why k = 3 for the floor and not semlith's 6: a larger scale pushes the variance of
quiet rows into fp16's subnormal range, and the scaled epsilon with it. Measured
on all-MiniLM-L6-v2: k = 6 dropped the fp32-simulated cosine to torch from
0.9999999 to 0.99982; k = 3 keeps 0.9999999. fp16 cannot hold an epsilon below
2^-24 (6e-8): a layer_norm's scaled epsilon is raised to at least that, and an
epsilon such as BERT's 1e-12, which would be 0 in fp16, is raised in any case;
both are noted in the report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from coremltools.converters.mil.mil import Builder as mb
from coremltools.converters.mil.mil.passes.pass_registry import register_pass

from anekit._milgraph import mil_defaults
from anekit.ops.groups import ROOTS, SCALINGS, SQUARING_REDUCTIONS, SUMS_OF_SQUARES
from anekit.ops.limits import FP16_TINY
from anekit.passes.base import AnePass
from anekit.passes.graph import consumers, float_dtype, replace_var, scalar_value

#: fp16's smallest normal value: the least row maximum a root rewrite divides by.
FP16_SMALLEST_NORMAL = 2.0**-14
#: Default floor exponent k of the layer_norm rewrite: rows are divided by
#: max(max|x|, 2^k) (see the module doc).
SCALE_EXPONENT = 3
#: Name suffix of the ops this pass made, so that a second run leaves them alone.
_MARK = "_fp16safe"


@dataclass
class _Root:
    """A matched ``root(scale(reduce(v²)) + eps)``; ``root`` is the op replaced."""

    root: Any
    v: Any
    reduce: Any
    scale: tuple[str, float] | None  # (mul or real_div, c): the reduction times or over c
    eps: float


def _square_of(var: Any) -> Any | None:
    """``v`` when ``var`` is v*v, square(v) or pow(v, 2)."""
    op = var.op
    if op is None:
        return None
    if op.op_type == "square" or (op.op_type == "mul" and op.inputs["x"] is op.inputs["y"]):
        return op.inputs["x"]
    if op.op_type == "pow" and scalar_value(op.inputs["y"]) == 2.0:
        return op.inputs["x"]
    return None


def _constant_and_other(op: Any) -> tuple[float, Any] | None:
    """(c, other) when ``op``'s operands are a scalar constant and a computed value."""
    x, y = op.inputs["x"], op.inputs["y"]
    for constant, other in ((y, x), (x, y)):
        value = scalar_value(constant)
        if value is not None and other.val is None:
            if op.op_type == "real_div" and constant is not y:
                return None  # c / reduce is not a mean square
            return value, other
    return None


def _match(op: Any) -> _Root | None:
    """``op`` as sqrt/rsqrt of a (scaled) sum of squares plus an optional epsilon."""
    if op.op_type not in ROOTS or op.name.endswith(_MARK):
        return None
    if op.op_type == "reduce_l2_norm":
        return _Root(op, op.inputs["x"], op, None, 0.0)
    inner = op.inputs["x"]
    epsilon = op.inputs.get("epsilon") if op.op_type == "rsqrt" else None
    eps = 0.0 if epsilon is None else float(np.asarray(epsilon.val))
    if inner.op is not None and inner.op.op_type == "add":
        found = _constant_and_other(inner.op)
        if found is not None:
            eps, inner = eps + found[0], found[1]
    scale = None
    if inner.op is not None and inner.op.op_type in SCALINGS:
        found = _constant_and_other(inner.op)
        if found is None:
            return None
        scale, inner = (inner.op.op_type, found[0]), found[1]
    reduce = inner.op
    if reduce is None or reduce.op_type not in SUMS_OF_SQUARES or eps < 0:
        return None
    if reduce.inputs["axes"] is None or reduce.inputs["axes"].val is None:
        return None
    squared = reduce.inputs["x"]
    v = squared if reduce.op_type == "reduce_sum_square" else _square_of(squared)
    if v is None or v.val is not None:
        return None
    return _Root(op, v, reduce, scale, eps)


def _centred(v: Any, axes: list[int]) -> Any | None:
    """The mean var when ``v`` is ``x - mean(x)`` over ``axes`` with kept dims."""
    op = v.op
    if op is None or op.op_type != "sub":
        return None
    x, mean = op.inputs["x"], op.inputs["y"]
    reduce = mean.op
    if reduce is None or reduce.op_type != "reduce_mean" or reduce.inputs["x"] is not x:
        return None
    if not reduce.inputs["keep_dims"].val or reduce.inputs["axes"].val is None:
        return None
    if sorted(int(axis) % x.rank for axis in reduce.inputs["axes"].val) != sorted(axes):
        return None
    return mean


@register_pass(namespace="ane")
class fp16_safe_norm(AnePass):
    """Roots of mean squares and layer_norm ops, divided by each row's largest value."""

    #: The layer_norm rewrite's floor exponent k: it divides by max(max|x|, 2^k).
    scale_exponent: int = SCALE_EXPONENT
    #: False: layer_norm ops are only multiplied by 2^-k (one op instead of five, for
    #: activations known to stay small: an RMS under 13 * 2^k over 384 channels).
    dynamic: bool = True

    def rewrite(self, function: Any) -> None:
        for op in list(function.operations):
            if op.op_type == "layer_norm":
                if not op.name.endswith(_MARK):
                    self._layer_norm(function, op)
                continue
            found = _match(op)
            if found is not None:
                self._root(function, found)

    # -- roots of mean squares --------------------------------------------------

    def _root(self, function: Any, found: _Root) -> None:
        op, v, reduce = found.root, found.v, found.reduce
        name, dtype = op.name, float_dtype(v)
        axes = [int(axis) % v.rank for axis in reduce.inputs["axes"].val]
        keep = bool(reduce.inputs["keep_dims"].val)
        floor = max(FP16_SMALLEST_NORMAL, math.sqrt(found.eps) * 2.0**-7)
        mean = _centred(v, axes)
        if mean is None:
            peak, inverse = self._row_peak(v, axes, floor, op, name)
            scaled = mb.mul(x=v, y=inverse, before_op=op, name=f"{name}_unit")
        else:
            peak, scaled = self._centre(function, mean, axes, floor, name)
        squares = scaled  # reduce_sum_square and reduce_l2_norm square it themselves
        if reduce.op_type not in SQUARING_REDUCTIONS:
            squares = mb.mul(x=scaled, y=scaled, before_op=op, name=f"{name}_squares")
        mark = _MARK if reduce.op_type == "reduce_l2_norm" else ""
        total = getattr(mb, reduce.op_type)(
            x=squares, axes=axes, keep_dims=keep, before_op=op, name=f"{name}_sumsq{mark}"
        )
        if found.scale is not None:
            scale_op, factor = found.scale
            total = getattr(mb, scale_op)(
                x=total, y=dtype.type(factor), before_op=op, name=f"{name}_scaled"
            )
        if not keep:
            peak = mb.reshape(
                x=peak, shape=[int(dim) for dim in total.shape], before_op=op, name=f"{name}_peak_r"
            )
        if found.eps > 0:
            root_eps = math.sqrt(found.eps)
            if root_eps < FP16_TINY:
                self.note(
                    f"{name}: epsilon {found.eps:g} is below what fp16 can carry once "
                    "scaled; it is left out"
                )
            else:
                relative = mb.real_div(
                    x=dtype.type(root_eps), y=peak, before_op=op, name=f"{name}_eps_root"
                )
                eps = mb.mul(x=relative, y=relative, before_op=op, name=f"{name}_eps")
                total = mb.add(x=total, y=eps, before_op=op, name=f"{name}_plus_eps")
        root = total  # when reduce_l2_norm, which already took the root
        if op.op_type != "reduce_l2_norm":
            root = mb.sqrt(x=total, before_op=op, name=f"{name}{_MARK}")
        divided = self._divide_directly(function, found, scaled, root)
        result = mb.mul(x=root, y=peak, before_op=op, name=f"{name}_rescaled")
        if op.op_type == "rsqrt":
            result = mb.real_div(x=dtype.type(1.0), y=result, before_op=op, name=f"{name}_inv")
        replace_var(function, op, op.outputs[0], result)
        what = {"sqrt": "sqrt", "rsqrt": "rsqrt", "reduce_l2_norm": "l2 norm"}[op.op_type]
        self.changed(
            op,
            f"{what} of a sum of squares over {axes} -> divided by max|v| per row"
            + (f" ({divided} v / root -> (v / max|v|) / root)" if divided else ""),
        )

    @staticmethod
    def _divide_directly(function: Any, found: _Root, unit: Any, root: Any) -> int:
        """Readers that divide ``v`` by its root (``v / sqrt``, ``v * rsqrt``) divide
        ``v / a`` by the scaled root instead: a root of a sum of squares can itself
        exceed fp16 (an l2 norm of 384 values of RMS 3400) while the quotient cannot.
        Returns how many readers it rewrote."""
        op, v = found.root, found.v
        dtype = float_dtype(v)
        count = 0
        for reader in consumers(op.outputs[0]):
            x, y = reader.inputs.get("x"), reader.inputs.get("y")
            if op.op_type == "rsqrt" and reader.op_type == "mul" and v in (x, y) and x is not y:
                inverse = mb.real_div(
                    x=dtype.type(1.0), y=root, before_op=reader, name=f"{reader.name}_inv_root"
                )
                new = mb.mul(x=unit, y=inverse, before_op=reader, name=f"{reader.name}_unit")
            elif op.op_type != "rsqrt" and reader.op_type == "real_div" and x is v:
                new = mb.real_div(x=unit, y=root, before_op=reader, name=f"{reader.name}_unit")
            else:
                continue
            replace_var(function, reader, reader.outputs[0], new)
            count += 1
        return count

    def _centre(
        self, function: Any, mean: Any, axes: list[int], floor: float, name: str
    ) -> tuple[Any, Any]:
        """For ``v = x - mean(x)``: (a, v / a) with a = max(max|x|, floor), computed as
        ``x / a - mean(x / a)``: summing a row of large values overflows fp16 too, so
        every reader of the old mean reads ``a * mean(x / a)`` instead."""
        x = mean.op.inputs["x"]
        readers = {id(op) for op in mean.child_ops}
        first_reader = next(op for op in function.operations if id(op) in readers)
        peak, inverse = self._row_peak(x, axes, floor, first_reader, name)
        unit = mb.mul(x=x, y=inverse, before_op=first_reader, name=f"{name}_unit_x")
        unit_mean = mb.reduce_mean(
            x=unit, axes=axes, keep_dims=True, before_op=first_reader, name=f"{name}_unit_mean"
        )
        new_mean = mb.mul(x=unit_mean, y=peak, before_op=first_reader, name=f"{name}_mean")
        replace_var(function, new_mean.op, mean, new_mean)
        centred = mb.sub(x=unit, y=unit_mean, before_op=first_reader, name=f"{name}_unit")
        return peak, centred

    @staticmethod
    def _row_peak(v: Any, axes: list[int], floor: float, op: Any, name: str) -> tuple[Any, Any]:
        """(max(max|v|, floor), its reciprocal), over ``axes`` with kept dims."""
        dtype = float_dtype(v)
        magnitude = mb.abs(x=v, before_op=op, name=f"{name}_abs")
        peak = mb.reduce_max(
            x=magnitude, axes=axes, keep_dims=True, before_op=op, name=f"{name}_peak"
        )
        peak = mb.maximum(x=peak, y=dtype.type(floor), before_op=op, name=f"{name}_peak_floor")
        inverse = mb.real_div(x=dtype.type(1.0), y=peak, before_op=op, name=f"{name}_peak_inv")
        return peak, inverse

    # -- layer_norm ops -----------------------------------------------------------

    def _layer_norm(self, function: Any, op: Any) -> None:
        epsilon = op.inputs.get("epsilon")
        eps = mil_defaults(op)["epsilon"] if epsilon is None else scalar_value(epsilon)
        if eps is None or op.inputs.get("axes") is None or op.inputs["axes"].val is None:
            return
        x = op.inputs["x"]
        dtype = float_dtype(x)
        k = self.scale_exponent
        if not self.dynamic and not k and eps >= FP16_TINY:
            return  # nothing to change
        axes = [int(axis) for axis in op.inputs["axes"].val]
        scaled_eps = eps * 2.0 ** (-2 * k)
        if scaled_eps < FP16_TINY:
            effective = FP16_TINY * 2.0 ** (2 * k)
            self.note(
                f"{op.name}: epsilon {eps:g} "
                + (f"scaled by 2^-{2 * k} " if k else "")
                + f"is below fp16's smallest value; the effective epsilon is {effective:.3g}"
            )
            scaled_eps = FP16_TINY
        if self.dynamic:
            _, inverse = self._row_peak(x, [a % x.rank for a in axes], 2.0**k, op, op.name)
            what = f"layer_norm(x / max(max|x|, 2^{k}))"
        else:
            inverse, what = dtype.type(2.0**-k), f"layer_norm(x * 2^-{k})"
        scaled = x
        if self.dynamic or k:
            scaled = mb.mul(x=x, y=inverse, before_op=op, name=f"{op.name}_prescale")
        affine = {name: op.inputs[name] for name in ("gamma", "beta") if name in op.inputs}
        result = mb.layer_norm(
            x=scaled,
            axes=axes,
            epsilon=dtype.type(scaled_eps),
            before_op=op,
            name=f"{op.name}{_MARK}",
            **affine,
        )
        replace_var(function, op, op.outputs[0], result)
        self.changed(op, f"layer_norm -> {what}")

"""Activation scales for int8 linear layers, set so that int8 loses little of the inputs.

ONNX Runtime's dynamic quantization (``DynamicQuantizeLinear``) gives a linear layer's
whole input one scale, from its largest value. Transformer activations have outliers: a
few channels of every LayerNorm output, and a few tokens ([CLS], [SEP], punctuation) in
the MLP's hidden layer. One scale for all of them leaves the other values few of the 256
levels; on MiniLM that cost a min cosine to fp32 of 0.988 on the known answers and 0.966
on one- to three-word texts (bench/int8_routes.py measures every route below). Two
rewrites of the float32 graph, applied before quantizing:

- :func:`smooth` (SmoothQuant: Xiao et al., 2023, https://arxiv.org/abs/2211.10438): a
  linear layer fed by a ``LayerNormalization`` reads its input divided per channel by
  ``s_j = max|x_j| ** ALPHA / max|W_j| ** (1 - ALPHA)`` (one ``Mul``) and its weight's
  rows ``j`` multiplied by ``s_j``: the same product, with the outlier channels moved
  into the weight, which is quantized per output channel. ``max|x_j|`` comes from
  calibration inputs (:func:`input_statistics`). Layers that share an input share ``s``.
- :func:`per_token`: a down projection (more inputs than outputs: the MLP's second
  layer, fed by the activation function) whose rows are uneven in the calibration runs
  (:data:`ROW_SPREAD`) is quantized with one scale per row (token),
  symmetric (``max|x| -> 127``), stored as u8 with zero point 128, the form ONNX
  Runtime's int8 kernels take (u8 x s8, or u8 x u8 where that saturates:
  :mod:`anekit.package.int8_kernels`), and multiplied by its ``MatMulIntegerToFloat``
  (com.microsoft) with the weight's column scales, the row scales after. A row's scale
  is its own, so a row's result does not depend on the other rows.

:func:`prepare` does both on a model and names the layers that :func:`per_token` then
rewrites in the quantized model (ONNX Runtime's quantizer leaves them float32).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from anekit.onnxgraph.edit import GraphEdit

#: SmoothQuant's migration strength: how much of each channel's range moves into the
#: weight. On MiniLM's calibration texts (anekit.models.calibration) 0.75 kept the
#: highest min cosine to fp32 of 0.6-0.8 (bench/int8_routes.py).
ALPHA = 0.75
#: A down projection gets a scale per row when, over the calibration texts, the loudest
#: row's peak is at least this many times the median row's (in the median text): with one
#: scale per run the median row then has at most 127 / 6 = 21 levels. MiniLM's first
#: three layers measure 7.1-8.1, the fourth 5.8, the last two 1.7-2.1; per-row scales on
#: the first three kept the min cosine to fp32 of all six (bench/int8_routes.py).
ROW_SPREAD = 6.0
#: Smoothing factors are kept within these bounds (a channel that never fires).
FACTOR_RANGE = (1e-3, 1e3)
#: The u8 zero point of a symmetric per-token quantization.
ZERO_POINT = 128
#: ``-min GELU(x)``, rounded up (GELU's minimum is -0.16997 at x = -0.7518; the tanh
#: form's is within 1e-4 of it): a row read from a ``Gelu`` needs no pass for its minimum.
GELU_MINIMUM = np.float32(0.17)
_TINY = np.float32(1e-12)
MICROSOFT = "com.microsoft"


@dataclass
class Linear:
    """A ``MatMul`` by a constant (K, N) weight: its node, weight and what feeds it."""

    node: Any
    weight: np.ndarray
    source_op: str | None  # the op type that makes its input (None: a graph input)

    @property
    def down_projection(self) -> bool:
        """More inputs than outputs: an MLP's second layer."""
        rows, columns = self.weight.shape
        return bool(rows > columns)


def linear_layers(model: Any) -> list[Linear]:
    """The float32 ``MatMul`` nodes of ``model`` whose second input is a 2-D initializer."""
    from onnx import TensorProto, numpy_helper

    initializers = {item.name: item for item in model.graph.initializer}
    producers = {output: node.op_type for node in model.graph.node for output in node.output}
    found = []
    for node in model.graph.node:
        if node.op_type != "MatMul" or node.domain not in ("", "ai.onnx"):
            continue
        item = initializers.get(node.input[1])
        if item is None or item.data_type != TensorProto.FLOAT or len(item.dims) != 2:
            continue
        weight = np.asarray(numpy_helper.to_array(item), np.float32)
        found.append(Linear(node, weight, producers.get(node.input[0])))
    return found


@dataclass
class InputStatistics:
    """What calibration runs showed of one tensor: the largest ``|x|`` per channel (last
    axis), and per run the loudest row's peak over the median row's (its ``row_spread``)."""

    peaks: np.ndarray
    row_spreads: list[float]

    @property
    def row_spread(self) -> float:
        """The median run's row spread."""
        return float(np.median(self.row_spreads))


def input_statistics(
    model: Any, names: Iterable[str], feeds: Iterable[dict[str, np.ndarray]]
) -> dict[str, InputStatistics]:
    """:class:`InputStatistics` of the tensors ``names`` over the runs of ``model`` (an
    ``onnx.ModelProto``, float32) on ``feeds``, in ONNX Runtime on the CPU."""
    import onnx
    import onnxruntime

    wanted = list(dict.fromkeys(names))
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    present = {item.name for item in probe.graph.output}
    for name in wanted:
        if name not in present:
            probe.graph.output.append(onnx.ValueInfoProto(name=name))
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(
        probe.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    found: dict[str, InputStatistics] = {}
    for feed in feeds:
        for name, value in zip(wanted, session.run(wanted, feed), strict=True):
            flat = np.abs(np.asarray(value, np.float32)).reshape(-1, value.shape[-1])
            if not flat.size:
                continue
            rows = flat.max(axis=1)
            spread = float(rows.max() / max(float(np.median(rows)), 1e-30))
            if name in found:
                found[name].peaks = np.maximum(found[name].peaks, flat.max(axis=0))
                found[name].row_spreads.append(spread)
            else:
                found[name] = InputStatistics(flat.max(axis=0), [spread])
    if not found and wanted:
        raise ValueError("input_statistics needs at least one calibration input")
    return found


def smoothing_factors(peak: np.ndarray, weights: list[np.ndarray], alpha: float) -> np.ndarray:
    """SmoothQuant's ``s_j`` for an input of channel peaks ``peak`` read by ``weights``."""
    weight_peak = np.max([np.abs(weight).max(axis=1) for weight in weights], axis=0)
    factors = peak.astype(np.float64) ** alpha / np.maximum(weight_peak, 1e-5) ** (1 - alpha)
    clipped: np.ndarray = np.clip(factors, *FACTOR_RANGE).astype(np.float32)
    return clipped


def smooth(model: Any, peaks: dict[str, np.ndarray], alpha: float = ALPHA) -> list[str]:
    """Move each LayerNorm-fed input's outlier channels into the weights that read it
    (module doc); ``peaks``: each input's channel peaks (:func:`input_statistics`).
    Returns the inputs smoothed."""
    from onnx import helper, numpy_helper

    groups: dict[str, list[Linear]] = {}
    for layer in linear_layers(model):
        if layer.source_op == "LayerNormalization":
            groups.setdefault(layer.node.input[0], []).append(layer)
    edit = GraphEdit(model)
    nodes = list(model.graph.node)
    for source, layers in groups.items():
        factors = smoothing_factors(peaks[source], [layer.weight for layer in layers], alpha)
        for layer in layers:
            scaled = (layer.weight * factors[:, None]).astype(np.float32)
            name = layer.node.input[1]
            edit.initializers[name].CopyFrom(numpy_helper.from_array(scaled, name))
        inverse = edit.add(f"{source}_smoothing", (1 / factors).astype(np.float32))
        smoothed = edit.fresh(f"{source}_smoothed")
        first = min(nodes.index(layer.node) for layer in layers)
        nodes.insert(first, helper.make_node("Mul", [source, inverse], [smoothed]))
        for layer in layers:
            layer.node.input[0] = smoothed
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return list(groups)


def prepare(model: Any, feeds: Iterable[dict[str, np.ndarray]], alpha: float = ALPHA) -> list[str]:
    """Smooth ``model``'s LayerNorm-fed linear layers from the calibration ``feeds`` and
    name the down projections whose rows are uneven (a median :attr:`row_spread` of at
    least :data:`ROW_SPREAD`); returns their names, for the quantizer to leave float32
    and :func:`per_token` to rewrite after."""
    layers = linear_layers(model)
    smoothed = [layer.node.input[0] for layer in layers if layer.source_op == "LayerNormalization"]
    down = [layer.node.input[0] for layer in layers if layer.down_projection]
    statistics = input_statistics(model, [*smoothed, *down], feeds)
    if smoothed:
        smooth(model, {name: statistics[name].peaks for name in smoothed}, alpha)
    return name_layers(
        model,
        lambda layer: (
            layer.down_projection and statistics[layer.node.input[0]].row_spread >= ROW_SPREAD
        ),
    )


def name_layers(model: Any, which: Callable[[Linear], bool]) -> list[str]:
    """The names of ``model``'s linear layers that ``which`` picks, giving the unnamed
    ones a fresh name (ONNX Runtime's quantizer excludes nodes by name)."""
    edit = GraphEdit(model)
    names = []
    for layer in linear_layers(model):
        if which(layer):
            if not layer.node.name:
                layer.node.name = edit.fresh("linear")
            names.append(layer.node.name)
    return names


def per_token(model: Any, names: Iterable[str], form: str | None = None) -> int:
    """Rewrite the float32 linear layers named ``names`` in ``model`` (quantized
    otherwise) as int8 with a scale per row (module doc). Returns how many. ``form``:
    the weights stored as int8 (``s8``) or as uint8 with zero point 128 (``u8``, for
    machines whose u8 x s8 kernels saturate); default: the form this machine multiplies
    exactly (:mod:`anekit.package.int8_kernels`)."""
    from onnx import helper

    from anekit.package import int8_kernels

    form = int8_kernels.check_form(form)
    weight_zero_point = int8_kernels.zero_point(form)

    wanted = set(names)
    done: set[str] = set()
    edit = GraphEdit(model)
    if not any(item.domain == MICROSOFT for item in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MICROSOFT, 1))
    by_node = {id(layer.node): layer for layer in linear_layers(model)}
    nodes: list[Any] = []
    for node in model.graph.node:
        layer = by_node.get(id(node))
        if layer is None or node.name not in wanted:
            nodes.append(node)
            continue
        done.add(node.name)
        edit.replaced.add(node.input[1])
        rows = layer.weight.shape[0]
        column_scale = np.maximum(np.abs(layer.weight).max(axis=0), _TINY) / np.float32(127)
        levels = np.clip(np.round(layer.weight / column_scale), -127, 127)

        def const(base: str, value: Any, prefix: str = node.name) -> str:
            return edit.add(f"{prefix}_{base}", np.asarray(value))

        def out(base: str, prefix: str = node.name) -> str:
            return edit.fresh(f"{prefix}_{base}")

        x, y = node.input[0], node.output[0]
        shape, flat, top, bottom = out("shape"), out("rows"), out("max"), out("min")
        negated, peak, raw_scale, scale = out("negmin"), out("peak"), out("raw_scale"), out("scale")
        row_scale, count, zero_point = out("row_scale"), out("count"), out("zero_point")
        xq_rows, xq, product = out("xq_rows"), out("xq"), out("product")
        last = const("last_axis", np.array([-1], np.int64))
        nodes += [
            helper.make_node("ReduceMax", [x, last], [top], keepdims=1),
        ]
        if layer.source_op == "Gelu":  # never below GELU_MINIMUM: no pass for the row's min
            nodes.append(helper.make_node("Max", [top, const("gelu_floor", GELU_MINIMUM)], [peak]))
        else:
            nodes += [
                helper.make_node("ReduceMin", [x, last], [bottom], keepdims=1),
                helper.make_node("Neg", [bottom], [negated]),
                helper.make_node("Max", [top, negated], [peak]),
            ]
        nodes += [
            # scale (..., 1): max|x| of the row -> 127
            helper.make_node("Mul", [peak, const("per_level", np.float32(1 / 127))], [raw_scale]),
            helper.make_node("Max", [raw_scale, const("tiny", _TINY)], [scale]),
            # QuantizeLinear's per-axis form: the rows flat, a scale and a zero point each
            helper.make_node(
                "Reshape", [scale, const("flat_scale", np.array([-1], np.int64))], [row_scale]
            ),
            helper.make_node("Shape", [row_scale], [count]),
            helper.make_node(
                "Expand", [const("middle", np.uint8(ZERO_POINT)), count], [zero_point]
            ),
            helper.make_node("Reshape", [x, const("flat", np.array([-1, rows], np.int64))], [flat]),
            helper.make_node("QuantizeLinear", [flat, row_scale, zero_point], [xq_rows], axis=0),
            helper.make_node("Shape", [x], [shape]),
            helper.make_node("Reshape", [xq_rows, shape], [xq]),
            helper.make_node(
                "MatMulIntegerToFloat",
                [
                    xq,
                    const("weight", int8_kernels.stored(levels, form)),
                    const("one", np.float32(1)),
                    const("column_scale", column_scale.astype(np.float32)),
                    const("a_zero_point", np.uint8(ZERO_POINT)),
                    const("b_zero_point", weight_zero_point),
                ],
                [product],
                domain=MICROSOFT,
            ),
            helper.make_node("Mul", [product, scale], [y]),
        ]
    if done != wanted:
        raise ValueError(f"per_token: no float32 linear layer named {sorted(wanted - done)}")
    edit.finish(nodes)
    return len(done)


__all__ = [
    "ALPHA",
    "ROW_SPREAD",
    "InputStatistics",
    "Linear",
    "input_statistics",
    "linear_layers",
    "name_layers",
    "per_token",
    "prepare",
    "smooth",
]

"""int8 ONNX models: weights quantized per output channel, activations at run time.

:func:`quantize_int8` turns an emitted float32 model (:mod:`anekit.package.onnx_emitter`)
into ONNX Runtime's dynamic int8 form. Given calibration inputs it first scales the
activations so that int8 loses little of them (:mod:`anekit.package.activation_scales`).
The weights are stored in the form this machine's ONNX Runtime multiplies exactly
(:mod:`anekit.package.int8_kernels`: int8, or uint8 where its u8 x s8 kernels saturate).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anekit.onnxgraph.edit import GraphEdit
from anekit.package import activation_scales, int8_kernels


def quantize_int8(
    source: Path,
    target: Path,
    per_channel: bool = True,
    calibration: Iterable[dict[str, np.ndarray]] | None = None,
    form: str | None = None,
) -> Path:
    """Dynamic int8 quantization of the weights of MatMul and Conv: the weights are
    stored as int8, the activations quantized at run time (``DynamicQuantizeLinear``)
    and the products computed in integers.

    The 1x1 convolutions the ANE passes make of matmuls become MatMul again first
    (:func:`convs_as_matmuls`): ONNX Runtime's Conv quantizer ignores ``per_channel``,
    and its ``ConvInteger`` kernel measured 5x slower than its fused int8 MatMul on
    the ANE-layout MiniLM (bench/int8_granularity.py). ``per_channel`` (the default):
    one symmetric scale per output channel, for MatMul weights by ONNX Runtime's
    ``quantize_dynamic(per_channel=True)``, for any other Conv here
    (:func:`quantize_convs_per_channel`). ``per_channel=False``: one scale per weight
    tensor (ONNX Runtime's quantizer for both), for comparison only: min cosine 0.91
    against 0.99 per channel on the known answers.

    ``calibration``: inputs of the model (feeds of one run each) to set activation scales
    from (:func:`anekit.package.activation_scales.prepare`: LayerNorm-fed inputs
    smoothed, down projections quantized per row); without it every activation gets one
    scale per run (ONNX Runtime's ``DynamicQuantizeLinear``).

    ``form``: how the weights are stored, ``s8`` or ``u8``
    (:data:`anekit.package.int8_kernels.WEIGHT_FORMS`); default: the form this
    machine's ONNX Runtime multiplies exactly (:func:`~anekit.package.int8_kernels.weight_form`)."""
    import onnx

    form = int8_kernels.check_form(form)

    target.parent.mkdir(parents=True, exist_ok=True)
    model = onnx.load(str(source))
    convs_as_matmuls(model)
    op_types = ["MatMul", "Conv"]
    if per_channel:
        quantize_convs_per_channel(model, form)
        op_types = ["MatMul"]
    per_row: list[str] = []
    if calibration is not None:
        if not per_channel:
            raise ValueError("calibrated activation scales need per-channel weights")
        per_row = activation_scales.prepare(model, calibration)
    dynamic_int8(
        model, target, per_channel=per_channel, op_types=op_types, exclude=per_row, form=form
    )
    if per_row:
        quantized = onnx.load(str(target))
        activation_scales.per_token(quantized, per_row, form)
        onnx.save(quantized, str(target))
    return target


def dynamic_int8(
    model: Any,
    target: Path,
    *,
    per_channel: bool = True,
    op_types: Sequence[str] = ("MatMul",),
    exclude: Sequence[str] = (),
    form: str | None = None,
) -> Path:
    """ONNX Runtime's ``quantize_dynamic`` of ``model`` (an ``onnx.ModelProto``) to
    ``target``: 8-bit weights of ``op_types`` (per output channel, or per tensor), except
    the nodes named in ``exclude``; ``form`` ``s8``: int8, symmetric (``QInt8``), ``u8``:
    uint8 (``QUInt8``, ONNX Runtime's asymmetric form: a zero point per channel); default
    the form this machine multiplies exactly (:mod:`anekit.package.int8_kernels`)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    form = int8_kernels.check_form(form)
    root = logging.getLogger()
    hint = _DropPreprocessingHint()
    root.addFilter(hint)  # ORT logs a generic hint to the root logger on every call
    try:
        quantize_dynamic(
            model,
            str(target),
            per_channel=per_channel,
            weight_type=QuantType.QInt8 if form == "s8" else QuantType.QUInt8,
            op_types_to_quantize=list(op_types),
            nodes_to_exclude=list(exclude),
        )
    finally:
        root.removeFilter(hint)
    return target


class _GraphEdit(GraphEdit):
    """Rewrites the float32 ``Conv`` nodes of a graph whose weight (and bias, if any)
    are initializers, keeping every other node and its order."""

    def _float(self, name: str) -> np.ndarray | None:
        from onnx import TensorProto, numpy_helper

        item = self.initializers.get(name)
        if item is None or item.data_type != TensorProto.FLOAT:
            return None
        return np.asarray(numpy_helper.to_array(item))

    def conv(self, node: Any) -> tuple[np.ndarray, np.ndarray | None] | None:
        """The weight and bias of a Conv this edit can rewrite, else None."""
        if node.op_type != "Conv" or node.domain not in ("", "ai.onnx"):
            return None
        weight = self._float(node.input[1])
        bias_name = node.input[2] if len(node.input) > 2 else ""
        bias = self._float(bias_name) if bias_name else None
        if weight is None or weight.ndim < 3 or (bias_name and bias is None):
            return None
        return weight, bias


def _attributes(node: Any) -> dict[str, Any]:
    from onnx import helper

    return {item.name: helper.get_attribute_value(item) for item in node.attribute}


def _is_pointwise(node: Any, weight: np.ndarray) -> bool:
    """A 1x1 convolution of stride 1, no padding and one group (any ``auto_pad`` pads
    nothing then): a matmul over the channel axis at every position."""
    attributes = _attributes(node)
    spatial = weight.ndim - 2
    return (
        all(size == 1 for size in weight.shape[2:])
        and int(attributes.get("group", 1)) == 1
        and list(attributes.get("strides", [1] * spatial)) == [1] * spatial
        and not any(attributes.get("pads", [0] * 2 * spatial))
    )


def convs_as_matmuls(model: Any) -> int:
    """Rewrite, in ``model`` (an ``onnx.ModelProto``), each 1x1 ``Conv`` (stride 1, no
    padding, one group; float32 weight and bias initializers) as the matmul it is:
    ``Transpose`` the channels last, ``MatMul`` by the (C_in, C_out) weight, ``Add``
    the bias, ``Transpose`` back. Returns how many were rewritten.

    The ANE passes spell every matmul with a constant weight as such a convolution on
    (B, C, 1, S); as MatMul, ONNX Runtime's dynamic quantization stores its weight per
    output channel and runs it with its fused int8 MatMul kernels."""
    from onnx import helper

    edit = _GraphEdit(model)
    channels_last: dict[str, str] = {}
    matmul_weights: dict[str, str] = {}
    nodes = []
    rewritten = 0
    for node in model.graph.node:
        found = edit.conv(node)
        if found is None or not _is_pointwise(node, found[0]):
            nodes.append(node)
            continue
        weight, bias = found
        edit.replaced.update(node.input[1:])
        rank = weight.ndim
        x, output = node.input[0], node.output[0]
        if x not in channels_last:
            channels_last[x] = edit.fresh(f"{x}_channels_last")
            perm = [0, *range(2, rank), 1]
            nodes.append(helper.make_node("Transpose", [x], [channels_last[x]], perm=perm))
        if node.input[1] not in matmul_weights:
            rows = np.ascontiguousarray(weight.reshape(weight.shape[:2]).T)
            matmul_weights[node.input[1]] = edit.add(f"{node.input[1]}_matmul", rows)
        product = edit.fresh(f"{output}_channels_last")
        nodes.append(
            helper.make_node("MatMul", [channels_last[x], matmul_weights[node.input[1]]], [product])
        )
        if bias is not None:
            biased = edit.fresh(f"{output}_channels_last_biased")
            bias_name = edit.add(f"{node.input[2]}_matmul", bias.reshape(-1))
            nodes.append(helper.make_node("Add", [product, bias_name], [biased]))
            product = biased
        back = [0, rank - 1, *range(1, rank - 1)]
        nodes.append(helper.make_node("Transpose", [product], [output], perm=back))
        rewritten += 1
    edit.finish(nodes)
    return rewritten


def quantize_convs_per_channel(model: Any, form: str | None = None) -> int:
    """Rewrite, in ``model`` (an ``onnx.ModelProto``), each ``Conv`` with float32 weight
    (and bias) initializers as dynamic int8 with one weight scale per output channel;
    returns how many were rewritten.

    The pattern is ONNX Runtime's own for dynamic Conv quantization
    (``onnxruntime.quantization.operators.conv.ConvInteger``): ``DynamicQuantizeLinear``
    on the activation (uint8, once per activation), ``ConvInteger`` with the int8
    weight, ``Cast`` to float, ``Mul`` by activation scale x weight scale, ``Add`` of
    the bias. The weights are symmetric (zero point 0, as ONNX Runtime's int8 weights
    are), so ``ConvInteger``'s one weight zero point is 0 for every channel, and the
    per-channel scales (shape (1, C_out, 1, ...)) are applied by the ``Mul`` on the
    integer result, broadcast over its channel axis. ``form`` ``u8`` stores the same levels
    as uint8 with zero point 128; default: the form this machine multiplies exactly
    (:mod:`anekit.package.int8_kernels`)."""
    from onnx import TensorProto, helper

    form = int8_kernels.check_form(form)
    edit = _GraphEdit(model)
    activations: dict[str, tuple[str, str, str]] = {}
    weights: dict[str, tuple[str, str]] = {}
    zero = ""
    nodes = []
    rewritten = 0
    for node in model.graph.node:
        found = edit.conv(node)
        if found is None:
            nodes.append(node)
            continue
        weight, bias = found
        edit.replaced.update(node.input[1:])
        channels = (1, weight.shape[0]) + (1,) * (weight.ndim - 2)
        x, output = node.input[0], node.output[0]
        if x not in activations:
            quantized = tuple(edit.fresh(f"{x}_u8{part}") for part in ("", "_scale", "_zero"))
            nodes.append(helper.make_node("DynamicQuantizeLinear", [x], list(quantized)))
            activations[x] = (quantized[0], quantized[1], quantized[2])
        x_u8, x_scale, x_zero = activations[x]
        if node.input[1] not in weights:
            levels, scales = _symmetric_int8_per_channel(weight)
            weights[node.input[1]] = (
                edit.add(f"{node.input[1]}_i8", int8_kernels.stored(levels, form)),
                edit.add(f"{node.input[1]}_i8_scale", scales.reshape(channels)),
            )
        w_i8, w_scale = weights[node.input[1]]
        zero = zero or edit.add("conv_weight_zero_point", int8_kernels.zero_point(form))
        integers, floats = edit.fresh(f"{output}_i32"), edit.fresh(f"{output}_i32_float")
        scale = edit.fresh(f"{output}_scale")
        scaled = edit.fresh(f"{output}_unbiased") if bias is not None else output
        nodes += [
            helper.make_node(
                "ConvInteger", [x_u8, w_i8, x_zero, zero], [integers], **_attributes(node)
            ),
            helper.make_node("Cast", [integers], [floats], to=TensorProto.FLOAT),
            helper.make_node("Mul", [x_scale, w_scale], [scale]),
            helper.make_node("Mul", [floats, scale], [scaled]),
        ]
        if bias is not None:
            bias_name = edit.add(f"{node.input[2]}_channels", bias.reshape(channels))
            nodes.append(helper.make_node("Add", [scaled, bias_name], [output]))
        rewritten += 1
    edit.finish(nodes)
    return rewritten


def _symmetric_int8_per_channel(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 weights and one float32 scale per output channel (axis 0), symmetric as
    ONNX Runtime's int8 weights are: scale = max |w| / 127 (1 for an all-zero
    channel), values rounded to nearest (half to even) and clipped to [-127, 127]."""
    peak = np.abs(weight).reshape(weight.shape[0], -1).max(axis=1)
    scales = np.where(peak > 0, peak / np.float32(127), np.float32(1)).astype(np.float32)
    shaped = scales.reshape((-1,) + (1,) * (weight.ndim - 1))
    stored = np.clip(np.round(weight / shaped), -127, 127).astype(np.int8)
    return stored, scales


class _DropPreprocessingHint(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()

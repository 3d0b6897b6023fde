"""Which int8 weight form this machine's ONNX Runtime multiplies exactly.

ONNX Runtime's int8 products take uint8 activations. With int8 weights (``s8``, the
quantizer's default) its x86-64 kernels on AVX2 without VNNI use ``VPMADDUBSW``, which
adds two u8 x s8 products into an int16 and saturates: 255 x 127 x 2 = 64,770 does not
fit in 32,767, so the larger products are clipped and a layer's output is silently wrong
(ONNX Runtime's quantization guide, "When to use reduce_range and different quantization
formats": https://onnxruntime.ai/docs/performance/model-optimizations/quantization.html).
CPUs with AVX-512 VNNI or AVX-VNNI, and ARM64 (Apple silicon), multiply u8 x s8 in 32
bits. uint8 weights (``u8``: ONNX Runtime's ``QUInt8`` with a zero point per channel,
and zero point 128 in the layers anekit quantizes itself) take the u8 x u8 kernels,
which widen to 16 bits before multiplying and never saturate, at some cost in speed.

:func:`weight_form` asks ONNX Runtime itself, once per process: it runs one
``MatMulInteger`` whose exact result needs more than int16 per pair of products
(:func:`u8s8_saturates`), and picks ``s8`` where that comes back exact, ``u8``
otherwise. Measured on MiniLM (docs/benchmarks.md): on an AVX2 machine ``s8`` gave min
cosine 0.9887 to fp32 on the known answers and ``u8`` 0.9982, at 0.82x the speed.
"""

from __future__ import annotations

import functools

import numpy as np

#: The int8 weight forms: ``s8`` (int8, symmetric, zero point 0) and ``u8`` (uint8 with a
#: zero point: :data:`U8_ZERO_POINT` for the levels anekit stores itself, :func:`stored`).
WEIGHT_FORMS = ("s8", "u8")
#: The zero point of ``u8`` weights: the int8 level ``q`` is stored as ``q + 128``.
U8_ZERO_POINT = 128
#: The probe's inner size: long enough for every kernel's pairing of products.
_PROBE_DEPTH = 64


@functools.cache
def u8s8_saturates() -> bool:
    """Whether ONNX Runtime's CPU ``MatMulInteger`` of uint8 255s by int8 127s comes
    back short of the exact 255 x 127 x depth (int16 saturation of paired products)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(
        probe_model(), options, providers=["CPUExecutionProvider"]
    )
    got = session.run(None, {"a": np.full((4, _PROBE_DEPTH), 255, np.uint8)})[0]
    return bool((got != 255 * 127 * _PROBE_DEPTH).any())


def probe_model() -> bytes:
    """The serialized ONNX model of the probe: ``y = MatMulInteger(a, w)``, ``a`` uint8
    (4, depth), ``w`` an int8 initializer (depth, 8) of 127s, ``y`` int32; opset 13, IR 8.
    Encoded here field by field (onnx.proto's field numbers) so that the lean lane
    workers, which import ONNX Runtime and NumPy only, need not import ``onnx``; a test
    checks it against ``onnx.helper``'s model."""

    def varint(value: int) -> bytes:
        out = bytearray()
        while True:
            low, value = value & 0x7F, value >> 7
            out.append(low | (0x80 if value else 0))
            if not value:
                return bytes(out)

    def field(number: int, value: int | bytes | str) -> bytes:
        if isinstance(value, int):
            return varint(number << 3) + varint(value)
        data = value.encode() if isinstance(value, str) else value
        return varint(number << 3 | 2) + varint(len(data)) + data

    def value_info(name: str, elem_type: int, dims: tuple[int, ...]) -> bytes:
        shape = b"".join(field(1, field(1, size)) for size in dims)
        return field(1, name) + field(2, field(1, field(1, elem_type) + field(2, shape)))

    uint8, int8, int32 = 2, 3, 6  # TensorProto.DataType
    weight = b"".join(field(1, size) for size in (_PROBE_DEPTH, 8)) + field(2, int8)
    weight += field(8, "w") + field(9, bytes([127]) * (_PROBE_DEPTH * 8))
    node = field(1, "a") + field(1, "w") + field(2, "y") + field(4, "MatMulInteger")
    graph = field(1, node) + field(2, "u8s8_probe") + field(5, weight)
    graph += field(11, value_info("a", uint8, (4, _PROBE_DEPTH)))
    graph += field(12, value_info("y", int32, (4, 8)))
    return field(1, 8) + field(7, graph) + field(8, field(1, "") + field(2, 13))


def weight_form() -> str:
    """``s8`` where this machine's ONNX Runtime multiplies u8 x s8 exactly, else ``u8``."""
    return "u8" if u8s8_saturates() else "s8"


def check_form(form: str | None) -> str:
    """``form`` if it is one of :data:`WEIGHT_FORMS` (``None``: :func:`weight_form`),
    else a ``ValueError`` naming them."""
    if form is None:
        return weight_form()
    if form not in WEIGHT_FORMS:
        raise ValueError(f"int8 weight form must be one of {', '.join(WEIGHT_FORMS)}, got {form!r}")
    return form


def stored(levels: np.ndarray, form: str | None) -> np.ndarray:
    """int8 ``levels`` (in [-127, 127]) as ``form`` stores them."""
    if check_form(form) == "s8":
        return levels.astype(np.int8)
    return (levels.astype(np.int16) + U8_ZERO_POINT).astype(np.uint8)


def zero_point(form: str | None) -> np.ndarray:
    """The scalar weight zero point of ``form``, in its dtype."""
    return (
        np.zeros((), np.int8) if check_form(form) == "s8" else np.asarray(U8_ZERO_POINT, np.uint8)
    )


__all__ = [
    "U8_ZERO_POINT",
    "WEIGHT_FORMS",
    "check_form",
    "probe_model",
    "stored",
    "u8s8_saturates",
    "weight_form",
    "zero_point",
]

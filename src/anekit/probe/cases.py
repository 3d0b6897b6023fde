"""The probe's cases: one small single-op program per MIL op type, at a representative
ANE shape.

A case names the op, its tensor inputs (shape, dtype, how values are drawn) in the
order of the op's MIL input spec, and its constant inputs. Float inputs are fp16,
as the ANE takes them; tensors are in the ANE's (B, C, 1, S) layout where the op
allows it, with the last axis at least 32 elements (the ANE pads narrower ones:
:data:`anekit.ops.limits`). The values are drawn so the op is well defined on them
(positive for ``log``, inside (-1, 1) for ``atanh``, ...), and ``tolerance`` bounds the
error of a device (or of the simulator's fp16 numerics) against the fp32 result,
relative to the largest |fp32 value|; ``None`` compares no values (random ops).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Values a tensor input can draw: name -> (rng, shape, dtype) -> array.
DISTRIBUTIONS = ("normal", "positive", "unit", "ints", "bool", "indices")

#: Default bound: a few fp16 roundings relative to the largest |value|.
FP16_TOLERANCE = 1e-2


@dataclass(frozen=True)
class Tensor:
    """One tensor input: its shape, dtype and the values it draws.

    ``values``: ``normal`` (standard normal), ``positive`` (uniform in [0.5, 2]),
    ``unit`` (uniform in (-0.9, 0.9)), ``ints`` (integers in [``low``, ``high``)),
    ``bool`` (True/False), ``indices`` (integers in [0, ``high``))."""

    shape: tuple[int, ...]
    dtype: str = "float16"
    values: str = "normal"
    low: int = -4
    high: int = 4

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        array: np.ndarray
        if self.values == "normal":
            array = rng.standard_normal(self.shape)
        elif self.values == "positive":
            array = rng.uniform(0.5, 2.0, self.shape)
        elif self.values == "unit":
            array = rng.uniform(-0.9, 0.9, self.shape)
        elif self.values == "ints":
            array = rng.integers(self.low, self.high, self.shape)
        elif self.values == "indices":
            array = rng.integers(0, self.high, self.shape)
        elif self.values == "bool":
            array = rng.random(self.shape) < 0.5
        else:
            raise ValueError(f"unknown values {self.values!r}; expected one of {DISTRIBUTIONS}")
        return np.asarray(array).astype(self.dtype)


#: An op input: one tensor, or a tuple of them (``concat``'s ``values``).
Input = Tensor | tuple[Tensor, ...]


@dataclass(frozen=True)
class Case:
    """One op type's probe program: ``op`` on ``inputs`` (tensors, or tuples of tensors
    for MIL's tuple inputs) and ``attrs`` (constants, as NumPy arrays or Python values)."""

    op: str
    inputs: tuple[Input, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    tolerance: float | None = FP16_TOLERANCE

    def arrays(self, seed: int = 0) -> list[Any]:
        """The input arrays, a tuple of arrays for a tuple input (the same for the same
        seed, on every machine)."""
        rng = np.random.default_rng(seed)
        return [
            tuple(part.sample(rng) for part in item)
            if isinstance(item, tuple)
            else item.sample(rng)
            for item in self.inputs
        ]

    def describe(self) -> str:
        """``add(1x64x1x64 float16, 1x64x1x64 float16)``; a tuple input in parentheses."""

        def text(tensor: Tensor) -> str:
            return f"{'x'.join(map(str, tensor.shape)) or 'scalar'} {tensor.dtype}"

        shapes = ", ".join(
            f"({', '.join(map(text, item))})" if isinstance(item, tuple) else text(item)
            for item in self.inputs
        )
        return f"{self.op}({shapes})"


def t(*shape: int, dtype: str = "float16", values: str = "normal", **bounds: int) -> Tensor:
    """A tensor input (see :class:`Tensor`)."""
    return Tensor(tuple(shape), dtype, values, **bounds)


def case(op: str, *inputs: Input, tolerance: float | None = FP16_TOLERANCE, **attrs: Any) -> Case:
    """A case (see :class:`Case`)."""
    return Case(op, tuple(inputs), attrs, tolerance)


#: The ANE layout shape most cases use: (B, C, 1, S) with 64 channels, 64 positions.
X = (1, 64, 1, 64)
#: An image-like shape for convolution, pooling and resampling: (B, C, H, W).
IMAGE = (1, 16, 16, 32)

_WEIGHTS = np.random.default_rng(20240607)


def w(*shape: int, scale: float = 1.0, shift: float = 0.0) -> np.ndarray:
    """A fixed fp16 constant (weights and other constant operands), the same on every
    machine: drawn in module order from one seeded generator."""
    return (shift + scale * _WEIGHTS.standard_normal(shape)).astype(np.float16)


def f16(value: float) -> np.float16:
    """An fp16 scalar constant (MIL wants scalar attributes in the input's dtype)."""
    return np.float16(value)


def i32(*values: int) -> np.ndarray:
    """An int32 vector constant (shapes, begins, pads)."""
    return np.array(values, np.int32)


_NO_REFERENCE = "the simulator has no reference for it"
#: Why the op table's constant (weights) ops have no case.
CONSTANT = "a constant (weights) op; probed through the ops that use it"
_LIST = "list op: a one-op program can neither take nor return a list"

#: Compute op types the probe has no case for, and why (the report lists them with the
#: reason; the table's constant ops get :data:`CONSTANT`).
NOT_PROBED: dict[str, str] = {
    # ops the simulator does not implement
    **dict.fromkeys(
        (
            "classify",
            "conv_quantized",
            "non_maximum_suppression",
            "resample",
            "torch_tensor_assign",
            "torch_upsample_bilinear",
            "torch_upsample_nearest_neighbor",
        ),
        _NO_REFERENCE,
    ),
    **dict.fromkeys(
        (
            "complex",
            "complex_abs",
            "complex_fft",
            "complex_fftn",
            "complex_ifft",
            "complex_ifftn",
            "complex_imag",
            "complex_irfft",
            "complex_irfftn",
            "complex_real",
            "complex_rfft",
            "complex_rfftn",
            "complex_shape",
            "complex_stft",
        ),
        "complex dtype: " + _NO_REFERENCE,
    ),
    **dict.fromkeys(
        ("random_bernoulli", "random_categorical", "random_normal", "random_uniform"),
        "random: " + _NO_REFERENCE,
    ),
    **dict.fromkeys(("coreml_update_state", "read_state"), "state: needs a state input"),
    # ops a one-op program cannot express
    **dict.fromkeys(("cond", "while_loop"), "control flow: needs nested blocks"),
    **dict.fromkeys(
        ("list_gather", "list_length", "list_read", "list_scatter", "list_write", "make_list"),
        _LIST,
    ),
    "non_zero": "data-dependent output shape: a package declares static output shapes",
}

# Elementwise math on one tensor, in the ANE layout.
_UNARY = (
    case("abs", t(*X)),
    case("acos", t(*X, values="unit")),
    case("asin", t(*X, values="unit")),
    case("atan", t(*X)),
    case("atanh", t(*X, values="unit")),
    case("ceil", t(*X)),
    case("cos", t(*X)),
    case("cosh", t(*X)),
    case("erf", t(*X)),
    case("exp", t(*X)),
    case("exp2", t(*X)),
    case("floor", t(*X)),
    case("inverse", t(*X, values="positive")),
    case("log", t(*X, values="positive")),
    case("round", t(*X)),
    case("rsqrt", t(*X, values="positive")),
    case("sign", t(*X)),
    case("sin", t(*X)),
    case("sinh", t(*X)),
    case("sqrt", t(*X, values="positive")),
    case("square", t(*X)),
    case("tan", t(*X, values="unit")),
    case("tanh", t(*X)),
)

# Elementwise math on two tensors (integer-valued floats for the floor ops: exact quotients).
_BINARY = (
    case("add", t(*X), t(*X)),
    case("floor_div", t(*X, values="ints", low=-16, high=16), t(*X, values="ints", low=1, high=5)),
    case("maximum", t(*X), t(*X)),
    case("minimum", t(*X), t(*X)),
    case("mod", t(*X, values="ints", low=-16, high=16), t(*X, values="ints", low=1, high=5)),
    case("mul", t(*X), t(*X)),
    case("pow", t(*X, values="positive"), t(*X)),
    case("real_div", t(*X), t(*X, values="positive")),
    case("sub", t(*X), t(*X)),
)

# Comparisons (small integer-valued floats, so ties occur) and logic.
_SMALL = t(*X, values="ints", low=-2, high=3)
_COMPARISONS = (
    case("equal", _SMALL, _SMALL),
    case("greater", _SMALL, _SMALL),
    case("greater_equal", _SMALL, _SMALL),
    case("less", _SMALL, _SMALL),
    case("less_equal", _SMALL, _SMALL),
    case("logical_and", t(*X, dtype="bool", values="bool"), t(*X, dtype="bool", values="bool")),
    case("logical_not", t(*X, dtype="bool", values="bool")),
    case("logical_or", t(*X, dtype="bool", values="bool"), t(*X, dtype="bool", values="bool")),
    case("logical_xor", t(*X, dtype="bool", values="bool"), t(*X, dtype="bool", values="bool")),
    case("not_equal", _SMALL, _SMALL),
    case("select", t(*X, dtype="bool", values="bool"), t(*X), t(*X)),
)

# Activations, with and without parameters.
_ACTIVATIONS = (
    case("clamped_relu", t(*X), alpha=f16(0.1), beta=f16(1.5)),
    case("clip", t(*X), alpha=f16(-0.5), beta=f16(1.25)),
    case("elu", t(*X), alpha=f16(1.0)),
    case("gelu", t(*X), mode="EXACT"),
    case("leaky_relu", t(*X), alpha=f16(0.1)),
    case("linear_activation", t(*X), alpha=f16(-1.5), beta=f16(0.25)),
    case("prelu", t(*X), alpha=w(64, scale=0.1, shift=0.2)),
    case("relu", t(*X)),
    case("relu6", t(*X, values="ints", low=-8, high=8)),
    case("scaled_tanh", t(*X), alpha=f16(1.5), beta=f16(0.75)),
    case("sigmoid", t(*X)),
    case("sigmoid_hard", t(*X), alpha=f16(0.2), beta=f16(0.5)),
    case("silu", t(*X)),
    case("softmax", t(*X), axis=1),
    case("softplus", t(*X)),
    case(
        "softplus_parametric",
        t(*X),
        alpha=w(64, scale=0.2, shift=1.0),
        beta=w(64, scale=0.2, shift=1.0),
    ),
    case("softsign", t(*X)),
    case("threshold", t(*X), alpha=f16(0.25)),
    case("thresholded_relu", t(*X), alpha=f16(0.3)),
)

# Normalizations over channels or space.
_NORMALIZATIONS = (
    case(
        "batch_norm",
        t(*IMAGE),
        mean=w(16, scale=0.5),
        variance=w(16, scale=0.2, shift=1.0),
        gamma=w(16),
        beta=w(16),
    ),
    case("instance_norm", t(*IMAGE), gamma=w(16), beta=w(16)),
    case("l2_norm", t(*X)),
    case("layer_norm", t(*X), axes=[1], gamma=w(64), beta=w(64)),
    case("local_response_norm", t(*IMAGE), size=5),  # size < 16: on the ANE
)

# Reductions along the channel axis.
_REDUCTIONS = (
    case("cumsum", t(*X), axis=-1),
    case("reduce_argmax", t(*X), axis=1),
    case("reduce_argmin", t(*X), axis=1),
    case("reduce_l1_norm", t(*X), axes=[1]),
    case("reduce_l2_norm", t(*X), axes=[1]),
    case("reduce_log_sum", t(*X, values="positive"), axes=[1]),
    case("reduce_log_sum_exp", t(*X), axes=[1]),
    case("reduce_max", t(*X), axes=[1]),
    case("reduce_mean", t(*X), axes=[1]),
    case("reduce_min", t(*X), axes=[1]),
    case("reduce_prod", t(1, 8, 1, 64, values="positive"), axes=[1]),  # 8 terms: no overflow
    case("reduce_sum", t(*X), axes=[1]),
    case("reduce_sum_square", t(*X), axes=[1]),
)

# Matrix products, convolutions and attention (weights scaled to unit-size outputs).
_LINEAR = (
    case(
        "conv",
        t(*IMAGE),
        weight=w(32, 16, 3, 3, scale=1 / 12),
        bias=w(32),
        pad_type="same",
    ),
    case(
        "conv_transpose",
        t(1, 32, 8, 16),
        weight=w(32, 16, 2, 2, scale=1 / 8),
        bias=w(16),
        strides=[2, 2],
    ),
    case("einsum", (t(1, 64, 4, 32), t(1, 32, 4, 64)), equation="nchw,nwhu->nchu"),
    case("linear", t(1, 64, 64), weight=w(64, 64, scale=1 / 8), bias=w(64)),
    case("matmul", t(1, 64, 64), t(1, 64, 64)),
    case("scaled_dot_product_attention", t(1, 4, 64, 32), t(1, 4, 64, 32), t(1, 4, 64, 32)),
)

# Pooling over (B, C, H, W).
_POOLING = (
    case("avg_pool", t(*IMAGE), kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid"),
    case("l2_pool", t(*IMAGE), kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid"),
    case("max_pool", t(*IMAGE), kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid"),
)

# Resampling, cropping and space/depth rearrangements of images.
_IMAGE_OPS = (
    # coremltools builds affine only with bilinear sampling, normalized_minus_one_to_one
    # coordinates and constant zero padding
    case(
        "affine",
        t(*IMAGE),
        transform_matrix=np.array([[0.9, 0.1, 0.05, -0.1, 0.9, 0.0]], np.float16),
        output_height=16,
        output_width=32,
        sampling_mode="bilinear",
        padding_mode="constant",
        padding_value=f16(0),
        coordinates_mode="normalized_minus_one_to_one",
        align_corners=True,
    ),
    case(
        "batch_to_space", t(4, 16, 8, 16), block_shape=i32(2, 2), crops=np.zeros((2, 2), np.int32)
    ),
    case("crop", t(*IMAGE), crop_height=i32(2, 2), crop_width=i32(4, 4)),
    case(
        "crop_resize",
        t(*IMAGE),
        boxes=np.array([[1.0, 2.0, 13.0, 29.0]], np.float16),  # (h0, w0, h1, w1) in pixels
        target_height=8,
        target_width=16,
    ),
    case("depth_to_space", t(1, 64, 4, 16), block_size=2),
    case("pixel_shuffle", t(1, 64, 4, 16), upscale_factor=2),
    case("pixel_unshuffle", t(*IMAGE), downscale_factor=np.uint32(2)),
    case("resize", t(1, 16, 8, 16), shape=i32(16, 32), resized_dims=np.uint32(2)),
    case("resize_bilinear", t(1, 16, 8, 16), target_size_height=16, target_size_width=32),
    case("resize_nearest_neighbor", t(1, 16, 8, 16), target_size_height=16, target_size_width=32),
    case("space_to_batch", t(*IMAGE), block_shape=i32(2, 2), paddings=np.zeros((2, 2), np.int32)),
    case("space_to_depth", t(*IMAGE), block_size=2),
    case("upsample_bilinear", t(1, 16, 8, 16), scale_factor_height=2, scale_factor_width=2),
    case("upsample_nearest_neighbor", t(1, 16, 8, 16), scale_factor_height=2, scale_factor_width=2),
)

# Shape and layout changes, slicing, joining and splitting.
_LAYOUT = (
    case("band_part", t(1, 64, 64), lower=np.int32(-1), upper=np.int32(0)),
    case("concat", (t(*X), t(1, 32, 1, 64)), axis=1, interleave=False),
    case("expand_dims", t(1, 64, 64), axes=[2]),
    case("flatten2d", t(*X), axis=1),
    case("identity", t(*X)),
    case("pad", t(*X), pad=i32(0, 0, 2, 2)),
    case(
        "reshape_like",
        t(1, 64, 64),
        ref_tensors=(np.zeros(X, np.float16),),
        begins=(0,),
        ends=(4,),
        end_masks=(True,),
    ),
    case("reshape", t(*X), shape=i32(1, 32, 2, 64)),
    case("reverse", t(*X), axes=[-1]),
    case(
        "reverse_sequence", t(4, 64, 32), t(4, dtype="int32", values="indices", high=65), seq_axis=1
    ),
    case(
        "slice_by_index",
        t(*X),
        begin=i32(0, 0, 0, 0),
        end=i32(1, 32, 1, 64),
        stride=i32(1, 1, 1, 2),
    ),
    case("slice_by_size", t(*X), begin=i32(0, 16, 0, 0), size=i32(1, 32, 1, 64)),
    case("slice_update", t(*X), t(1, 32, 1, 64), begin=i32(0, 16, 0, 0), end=i32(1, 48, 1, 64)),
    case("sliding_windows", t(1, 64, 64), axis=-1, size=16, stride=8),
    case("split", t(*X), num_splits=2, axis=1),
    case("squeeze", t(*X), axes=[2]),
    case("stack", (t(1, 64, 64), t(1, 64, 64)), axis=2),
    case("tile", t(1, 64, 1, 32), reps=i32(1, 1, 1, 2)),
    case("transpose", t(*X), perm=[0, 3, 2, 1]),
)

# Indexing: gathers, scatters, sorting and one-hot encoding.
_INDEXING = (
    case("argsort", t(*X), axis=-1),
    case("gather", t(512, 64), t(1, 64, dtype="int32", values="indices", high=512), axis=0),
    case("gather_along_axis", t(*X), t(*X, dtype="int32", values="indices", high=64), axis=-1),
    case("gather_nd", t(16, 32, 64), t(64, 2, dtype="int32", values="indices", high=16)),
    case(
        "one_hot",
        t(1, 64, dtype="int32", values="indices", high=16),
        one_hot_vector_size=16,
        on_value=f16(1),
        off_value=f16(0),
    ),
    case("scatter", t(32, 64), t(16, dtype="int32", values="indices", high=32), t(16, 64)),
    case(
        "scatter_along_axis",
        t(*X),
        t(*X, dtype="int32", values="indices", high=64),
        t(*X),
        axis=-1,
    ),
    case("scatter_nd", t(16, 32, 64), t(8, 2, dtype="int32", values="indices", high=16), t(8, 64)),
    case("topk", t(*X), k=8, axis=-1),
)

# Creation, dtype conversion and quantization. Ops whose inputs are all constants here
# (fill, range_1d: a runtime shape would make the output's dynamic; dequantize: a model
# takes no int8 input) are folded by the package's passes, so a device runs no such op:
# the probe reports them as folded.
_CREATION = (
    case("cast", t(*X, dtype="float32"), dtype="fp16"),  # the cast at an fp32 model input
    case(
        "dequantize",
        input=_WEIGHTS.integers(-100, 100, X).astype(np.int8),
        scale=f16(0.05),
        zero_point=np.int8(3),
    ),
    case("fill", shape=i32(*X), value=f16(1.5)),
    case("fill_like", t(*X), value=f16(-0.5)),
    # scale 1/16: x / scale is exact in fp16, so both numerics round the same quotients
    case("quantize", t(*X), scale=f16(1 / 16), zero_point=np.int8(0), output_dtype="int8"),
    case("range_1d", start=np.float32(0), end=np.float32(64), step=np.float32(0.5)),
    case("shape", t(*X)),
)

# Recurrent layers over a (T, B, D) sequence, hidden size 32.
_RECURRENT = (
    case(
        "gru",
        t(8, 1, 32),
        t(1, 32),
        weight_ih=w(96, 32, scale=0.2),
        weight_hh=w(96, 32, scale=0.2),
        output_sequence=True,
    ),
    case(
        "lstm",
        t(8, 1, 32),
        t(1, 32),
        t(1, 32),
        weight_ih=w(128, 32, scale=0.2),
        weight_hh=w(128, 32, scale=0.2),
        bias=w(128, scale=0.2),
        output_sequence=True,
    ),
    case(
        "rnn",
        t(8, 1, 32),
        t(1, 32),
        weight_ih=w(32, 32, scale=0.2),
        weight_hh=w(32, 32, scale=0.2),
        bias=w(32, scale=0.2),
        output_sequence=True,
    ),
)

#: One case per op type, sorted by op name.
CASES: tuple[Case, ...] = tuple(
    sorted(
        (
            *_UNARY,
            *_BINARY,
            *_COMPARISONS,
            *_ACTIVATIONS,
            *_NORMALIZATIONS,
            *_REDUCTIONS,
            *_LINEAR,
            *_POOLING,
            *_IMAGE_OPS,
            *_LAYOUT,
            *_INDEXING,
            *_CREATION,
            *_RECURRENT,
        ),
        key=lambda item: item.op,
    )
)


def by_op() -> dict[str, Case]:
    """Each op type's case."""
    return {item.op: item for item in CASES}

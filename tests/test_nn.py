"""anekit.nn: the NumPy path is the reference, the traced path emits native MIL ops."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import anekit
from anekit import errors, nn
from tracing import assert_traces_like_numpy, op_types

F32 = np.float32


@pytest.fixture
def bc1s(rng: np.random.Generator) -> np.ndarray:
    """An activation in the ANE layout (B, C, 1, S)."""
    return rng.standard_normal((2, 16, 1, 8)).astype(F32)


def test_softmax_native_and_correct(bc1s: np.ndarray) -> None:
    program = assert_traces_like_numpy(lambda x: nn.softmax(x, axis=1), bc1s, rtol=1e-5)
    assert op_types(program) == ["softmax"]
    np.testing.assert_allclose(nn.softmax(bc1s, axis=1).sum(axis=1), 1.0, rtol=1e-6)


def test_softmax_reference_is_stable_for_large_inputs() -> None:
    x = np.array([[1000.0, 1000.0]], F32)
    np.testing.assert_allclose(nn.softmax(x), [[0.5, 0.5]])


def test_layer_norm_native(bc1s: np.ndarray, rng: np.random.Generator) -> None:
    gamma = rng.standard_normal(16).astype(F32)
    beta = rng.standard_normal(16).astype(F32)
    program = assert_traces_like_numpy(
        lambda x: nn.layer_norm(x, gamma, beta, axis=1, eps=1e-5), bc1s, rtol=1e-5, atol=1e-5
    )
    assert op_types(program) == ["layer_norm"]
    plain = assert_traces_like_numpy(
        lambda x: nn.layer_norm(x, axis=-1), bc1s, rtol=1e-5, atol=1e-5
    )
    assert op_types(plain) == ["layer_norm"]


def test_layer_norm_reference_matches_definition(rng: np.random.Generator) -> None:
    x = rng.standard_normal((3, 7)).astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    expected = (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(nn.layer_norm(x), expected, rtol=1e-12)


def test_rms_norm_expansion(bc1s: np.ndarray, rng: np.random.Generator) -> None:
    weight = rng.standard_normal(16).astype(F32)
    program = assert_traces_like_numpy(
        lambda x: nn.rms_norm(x, weight, axis=1), bc1s, rtol=1e-5, atol=1e-6
    )
    assert op_types(program) == ["mul", "reduce_mean", "rsqrt", "mul", "mul"]


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_modes(approximate: Any, bc1s: np.ndarray) -> None:
    program = assert_traces_like_numpy(
        lambda x: nn.gelu(x, approximate=approximate), bc1s, rtol=1e-5, atol=1e-6
    )
    assert op_types(program) == ["gelu"]
    mode = "EXACT" if approximate == "none" else "TANH_APPROXIMATION"
    gelu_op = next(
        op for op in program.program.functions["main"].operations if op.op_type == "gelu"
    )
    assert gelu_op.mode.val == mode


def test_gelu_reference_values() -> None:
    x = np.array([-1.0, 0.0, 1.0, 2.0])
    exact = 0.5 * x * (1 + np.array([math.erf(v / math.sqrt(2)) for v in x]))
    np.testing.assert_allclose(nn.gelu(x), exact, rtol=1e-12)
    assert abs(nn.gelu(np.array([1.0]), approximate="tanh")[0] - 0.8411919906) < 1e-9


def test_silu_sigmoid_relu_erf(bc1s: np.ndarray) -> None:
    for fn, op in ((nn.silu, "silu"), (nn.sigmoid, "sigmoid"), (nn.relu, "relu"), (nn.erf, "erf")):
        program = assert_traces_like_numpy(fn, bc1s, rtol=1e-5, atol=1e-6)
        assert op_types(program) == [op]


def test_conv1x1_native_and_expansion(bc1s: np.ndarray, rng: np.random.Generator) -> None:
    weight = rng.standard_normal((24, 16)).astype(F32)
    bias = rng.standard_normal(24).astype(F32)
    program = assert_traces_like_numpy(
        lambda x: nn.conv1x1(x, weight, bias), bc1s, rtol=1e-5, atol=1e-5
    )
    assert op_types(program) == ["conv"]
    four_d = weight.reshape(24, 16, 1, 1)
    assert_traces_like_numpy(lambda x: nn.conv1x1(x, four_d), bc1s, rtol=1e-5, atol=1e-5)
    traced_weight = assert_traces_like_numpy(
        lambda x, w: nn.conv1x1(x, w, bias), bc1s, weight, rtol=1e-5, atol=1e-5
    )
    assert "conv" not in op_types(traced_weight)


@pytest.mark.parametrize(
    ("stride", "padding", "kernel"),
    [((1, 1), (0, 1), (1, 3)), ((1, 2), (0, 1), (1, 3)), ((2, 2), (1, 1), (3, 3))],
)
def test_conv2d_matches_torch_and_traces_to_one_conv(
    rng: np.random.Generator,
    stride: tuple[int, int],
    padding: tuple[int, int],
    kernel: tuple[int, int],
) -> None:
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((2, 8, 6, 40)).astype(np.float32)
    weight = rng.standard_normal((5, 8, *kernel)).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32)
    want = torch.nn.functional.conv2d(
        torch.from_numpy(x), torch.from_numpy(weight), torch.from_numpy(bias), stride, padding
    ).numpy()
    got = nn.conv2d(x, weight, bias, stride=stride, padding=padding)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    program = anekit.compile(
        lambda x: nn.conv2d(x, weight, bias, stride=stride, padding=padding), x
    )
    assert "conv" in op_types(program) and "matmul" not in op_types(program)
    np.testing.assert_allclose(program(x, backend="sim", mode="fp32"), want, rtol=1e-5, atol=1e-5)


def test_conv2d_refuses_traced_weights_and_wrong_shapes(rng: np.random.Generator) -> None:
    x = rng.standard_normal((1, 4, 1, 32)).astype(np.float32)
    with pytest.raises(errors.ShapeError, match="conv2d"):
        nn.conv2d(x, np.zeros((3, 5, 1, 3), np.float32))
    with pytest.raises(errors.TraceError, match="must be constants"):
        anekit.compile(lambda x, w: nn.conv2d(x, w), x, np.zeros((3, 4, 1, 3), np.float32))


def test_conv1x1_equals_linear_over_channels(bc1s: np.ndarray, rng: np.random.Generator) -> None:
    weight = rng.standard_normal((24, 16)).astype(F32)
    as_conv = nn.conv1x1(bc1s, weight)
    as_linear = nn.linear(bc1s[:, :, 0, :].transpose(0, 2, 1), weight).transpose(0, 2, 1)[
        :, :, None, :
    ]
    np.testing.assert_allclose(as_conv, as_linear, rtol=1e-5, atol=1e-5)


def test_linear_native_and_expansion(rng: np.random.Generator) -> None:
    x = rng.standard_normal((2, 5, 16)).astype(F32)
    weight = rng.standard_normal((8, 16)).astype(F32)
    bias = rng.standard_normal(8).astype(F32)
    program = assert_traces_like_numpy(
        lambda v: nn.linear(v, weight, bias), x, rtol=1e-5, atol=1e-5
    )
    assert op_types(program) == ["linear"]
    rank4 = assert_traces_like_numpy(lambda v: nn.linear(v[None], weight), x, rtol=1e-5, atol=1e-5)
    assert "matmul" in op_types(rank4)
    assert_traces_like_numpy(lambda v, w: nn.linear(v, w, bias), x, weight, rtol=1e-5, atol=1e-5)


def test_weights_follow_the_input_dtype(rng: np.random.Generator) -> None:
    x = rng.standard_normal((4, 16)).astype(np.float16)
    weight = rng.standard_normal((8, 16)).astype(np.float64)
    program = anekit.compile(lambda v: nn.linear(v, weight), x)
    assert program.output_specs[0].dtype == np.float16
    assert {w.dtype for w in program.weights()} == {np.dtype(np.float16)}
    assert "weight" in [w.name for w in program.weights()]


def test_embedding(rng: np.random.Generator) -> None:
    table = rng.standard_normal((10, 4)).astype(F32)
    ids = np.array([[3, 1], [9, 0]], np.int32)
    np.testing.assert_array_equal(nn.embedding(ids, table), table[ids])
    assert op_types(assert_traces_like_numpy(lambda i: nn.embedding(i, table), ids)) == ["gather"]


def test_shape_errors_name_the_parameter(bc1s: np.ndarray) -> None:
    with pytest.raises(errors.ShapeError, match="weight must have shape"):
        anekit.compile(lambda x: nn.layer_norm(x, np.ones(3, F32), axis=1), bc1s)
    with pytest.raises(errors.ShapeError, match=r"weight must be \(C_out, 16\)"):
        anekit.compile(lambda x: nn.conv1x1(x, np.ones((4, 3), F32)), bc1s)
    with pytest.raises(errors.ShapeError, match=r"\(B, C, H, W\)"):
        anekit.compile(lambda x: nn.conv1x1(x[0], np.ones((4, 16), F32)), bc1s)
    with pytest.raises(errors.TraceError, match="float16 or float32"):
        anekit.compile(lambda x: nn.softmax(x.astype(np.int32)), bc1s)
    with pytest.raises(ValueError, match="approximate"):
        nn.gelu(bc1s, approximate="fast")  # type: ignore[arg-type]

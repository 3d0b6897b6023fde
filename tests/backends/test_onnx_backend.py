"""The MIL -> ONNX emitter and the ONNX Runtime backend (CPU).

Every traced program is checked against a float64 NumPy reference written here from
the ops' definitions, independently of the emitter and of the simulator: once through
the public path (``program(..., backend="onnx")``) and once by running the emitted
model (:func:`to_onnx`) in a plain ONNX Runtime session. int8 mode is checked on the
structure of the quantized model that ran (int8 weights, one scale per output channel
for MatMul and Conv, the ANE passes' 1x1 convolutions included) and against the fp32
reference. Devices are read back from the sessions' providers, with ONNX Runtime's
quiet CUDA-to-CPU fallback shown by the real runtime and by the contract-enforcing
stand-in (tests/standins.py).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import numpy_helper
from scipy.special import erf

import anekit
from anekit import errors, nn
from anekit.backends import RunReport, available_backends, select_backend
from anekit.backends.onnx import (
    MODES,
    OnnxBackend,
    OnnxSession,
    ProviderMismatch,
    probe,
    providers,
    session_for,
)
from anekit.package.int8_kernels import WEIGHT_FORMS, u8s8_saturates, weight_form
from anekit.package.onnx_emitter import OPSET, save_onnx, to_onnx
from anekit.package.onnx_int8 import convs_as_matmuls, quantize_int8
from anekit.program import CompiledProgram
from anekit.runtimes import RUNTIMES
from standins import OnnxRuntime

F32 = np.float32
F64 = np.float64
CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"

# fp32 graphs against float64 references: a few ulp per op, accumulated over the dots.
RTOL, ATOL = 1e-4, 1e-5

_WEIGHTS = np.random.default_rng(20240607)


def weight(*shape: int, scale: float = 1.0) -> np.ndarray:
    """A fixed random float32 constant closed over by a traced function."""
    fan_in = shape[-1] if len(shape) > 1 else 1
    return (scale * _WEIGHTS.standard_normal(shape) / math.sqrt(fan_in)).astype(F32)


def wide(value: np.ndarray) -> np.ndarray:
    return np.asarray(value, F64)


# -- independent float64 references ----------------------------------------------------


def gelu_ref(x: np.ndarray) -> np.ndarray:
    return np.asarray(0.5 * x * (1.0 + erf(x / math.sqrt(2.0))))


def gelu_tanh_ref(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def layer_norm_ref(
    x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, axes: tuple[int, ...], eps: float
) -> np.ndarray:
    mean = x.mean(axis=axes, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    shape = [x.shape[axis] if axis in axes else 1 for axis in range(x.ndim)]
    normalized = (x - mean) / np.sqrt(variance + eps)
    return np.asarray(normalized * wide(gamma).reshape(shape) + wide(beta).reshape(shape))


def softmax_ref(x: np.ndarray, axis: int) -> np.ndarray:
    exps = np.exp(x - x.max(axis=axis, keepdims=True))
    return np.asarray(exps / exps.sum(axis=axis, keepdims=True))


def sigmoid_ref(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))


# -- the programs ----------------------------------------------------------------------

W1, B1 = weight(64, 32), weight(64, scale=0.5)
W2, B2 = weight(32, 64), weight(32, scale=0.5)
GAMMA, BETA = 1 + weight(32, scale=0.1), weight(32, scale=0.1)
GAMMA2, BETA2 = 1 + weight(16, 32, scale=0.1), weight(16, 32, scale=0.1)
GAMMA_MID, BETA_MID = 1 + weight(16, scale=0.1), weight(16, scale=0.1)
WQ, WK, WV, WO = (weight(32, 32) for _ in range(4))
LN_EPS = 1e-3  # not ONNX's default 1e-5: the attribute must carry it


def ffn(x: Any) -> Any:
    return nn.gelu(x @ W1.T + B1) @ W2.T + B2


def ffn_ref(x: np.ndarray) -> np.ndarray:
    return np.asarray(gelu_ref(wide(x) @ wide(W1).T + wide(B1)) @ wide(W2).T + wide(B2))


def ffn_tanh(x: Any) -> Any:
    return nn.linear(nn.gelu(nn.linear(x, W1, B1), approximate="tanh"), W2, B2)


def ffn_tanh_ref(x: np.ndarray) -> np.ndarray:
    hidden = gelu_tanh_ref(wide(x) @ wide(W1).T + wide(B1))
    return np.asarray(hidden @ wide(W2).T + wide(B2))


def layer_norm_last(x: Any) -> Any:
    return nn.layer_norm(x, GAMMA, BETA, axis=-1, eps=LN_EPS)


def layer_norm_last_ref(x: np.ndarray) -> np.ndarray:
    return layer_norm_ref(wide(x), GAMMA, BETA, (2,), LN_EPS)


def layer_norm_two(x: Any) -> Any:
    return nn.layer_norm(x, GAMMA2, BETA2, axis=(1, 2), eps=LN_EPS)


def layer_norm_two_ref(x: np.ndarray) -> np.ndarray:
    return layer_norm_ref(wide(x), GAMMA2, BETA2, (1, 2), LN_EPS)


def layer_norm_mid(x: Any) -> Any:
    return nn.layer_norm(x, GAMMA_MID, BETA_MID, axis=1, eps=LN_EPS)


def layer_norm_mid_ref(x: np.ndarray) -> np.ndarray:
    return layer_norm_ref(wide(x), GAMMA_MID, BETA_MID, (1,), LN_EPS)


def attention(x: Any, bias: Any) -> Any:
    q, k, v = x @ WQ.T, x @ WK.T, x @ WV.T
    scores = q @ np.transpose(k, (0, 2, 1)) / F32(math.sqrt(32)) + bias
    return nn.softmax(scores, axis=-1) @ v @ WO.T


def attention_ref(x: np.ndarray, bias: np.ndarray) -> np.ndarray:
    x = wide(x)
    q, k, v = x @ wide(WQ).T, x @ wide(WK).T, x @ wide(WV).T
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(32) + wide(bias)
    return np.asarray(softmax_ref(scores, -1) @ v @ wide(WO).T)


def elementwise(x: Any) -> Any:
    return (
        np.tanh(x) * np.exp(-x * x) + np.sqrt(np.abs(x) + 1) - nn.sigmoid(x) + np.maximum(x, 0.25)
    )


def elementwise_ref(x: np.ndarray) -> np.ndarray:
    x = wide(x)
    squashed = np.tanh(x) * np.exp(-x * x) + np.sqrt(np.abs(x) + 1)
    return np.asarray(squashed - sigmoid_ref(x) + np.maximum(x, 0.25))


def layout(x: Any) -> Any:
    flat = np.transpose(x.reshape(2, 16 * 32), (1, 0))
    return flat.reshape(8, 64, 2).transpose(2, 0, 1)[:, 1:7:2, ::-3]


def layout_ref(x: np.ndarray) -> np.ndarray:
    flat = wide(x).reshape(2, 512).T
    result: np.ndarray = flat.reshape(8, 64, 2).transpose(2, 0, 1)[:, 1:7:2, ::-3]
    return result


def reductions(x: Any) -> Any:
    total = x.sum(axis=-1)
    mean = x.mean(axis=(0, 2), keepdims=True)
    return total, mean, np.sum(x * x)


def reductions_ref(x: np.ndarray) -> tuple[np.ndarray, ...]:
    x = wide(x)
    return x.sum(axis=-1), x.mean(axis=(0, 2), keepdims=True), np.sum(x * x).reshape(1)


def select_concat(x: Any, bias: Any) -> Any:
    leaky = np.where(x > 0, x, 0.1 * x)
    return np.concatenate([leaky[:, :, :8], np.clip(x[:, :, 8:], -0.5, 0.5) + bias], axis=-1)


def select_concat_ref(x: np.ndarray, bias: np.ndarray) -> np.ndarray:
    x = wide(x)
    leaky = np.where(x > 0, x, 0.1 * x)
    return np.concatenate([leaky[:, :, :8], np.clip(x[:, :, 8:], -0.5, 0.5) + bias], axis=-1)


def activation(rng: np.random.Generator) -> np.ndarray:
    return rng.standard_normal((2, 16, 32)).astype(F32)


def key_bias(rng: np.random.Generator) -> np.ndarray:
    """An additive attention mask (B, 1, S): 0 to keep a key, -1e4 to drop it."""
    bias = np.where(rng.random((2, 1, 16)) < 0.3, -1e4, 0.0).astype(F32)
    bias[:, :, 0] = 0.0  # every row keeps a key
    return bias


def bias_24(rng: np.random.Generator) -> np.ndarray:
    return rng.standard_normal((1, 1, 24)).astype(F32)


@dataclass(frozen=True)
class Case:
    fn: Callable[..., Any]
    ref: Callable[..., Any]
    inputs: tuple[Callable[[np.random.Generator], np.ndarray], ...]
    #: ONNX ops the emitter must use for this program (passes off) ...
    fused: frozenset[str] = frozenset()
    #: ... and the ops that would mean it spelled them out instead.
    absent: frozenset[str] = frozenset()


CASES: dict[str, Case] = {
    "ffn_gelu": Case(ffn, ffn_ref, (activation,), frozenset({"Gelu"}), frozenset({"Erf"})),
    "ffn_gelu_tanh": Case(
        ffn_tanh, ffn_tanh_ref, (activation,), frozenset({"Gelu"}), frozenset({"Tanh"})
    ),
    "layer_norm": Case(
        layer_norm_last,
        layer_norm_last_ref,
        (activation,),
        frozenset({"LayerNormalization"}),
        frozenset({"Sqrt", "ReduceSum", "ReduceMean"}),
    ),
    "layer_norm_two_axes": Case(
        layer_norm_two,
        layer_norm_two_ref,
        (activation,),
        frozenset({"LayerNormalization"}),
        frozenset({"Sqrt", "ReduceSum", "ReduceMean"}),
    ),
    # Not the trailing axes: LayerNormalization cannot express it, so it is spelled out.
    "layer_norm_middle_axis": Case(
        layer_norm_mid, layer_norm_mid_ref, (activation,), absent=frozenset({"LayerNormalization"})
    ),
    "attention": Case(
        attention,
        attention_ref,
        (activation, key_bias),
        frozenset({"Softmax"}),
        frozenset({"Exp", "ReduceMax"}),
    ),
    "elementwise": Case(elementwise, elementwise_ref, (activation,)),
    "reshape_transpose_slice": Case(layout, layout_ref, (activation,)),
    "sum_mean": Case(reductions, reductions_ref, (activation,)),
    "where_clip_concat": Case(select_concat, select_concat_ref, (activation, bias_24)),
}


def inputs_of(case: Case, rng: np.random.Generator) -> list[np.ndarray]:
    return [make(rng) for make in case.inputs]


def as_list(result: Any) -> list[np.ndarray]:
    if isinstance(result, dict):
        return [np.asarray(value) for value in result.values()]
    if isinstance(result, tuple | list):
        return [np.asarray(value) for value in result]
    return [np.asarray(result)]


def assert_matches(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    assert len(got) == len(want), what
    for index, (actual, expected) in enumerate(zip(got, want, strict=True)):
        assert actual.dtype == F32, f"{what}, output {index}: {actual.dtype}"
        assert actual.shape == expected.shape, f"{what}, output {index}"
        np.testing.assert_allclose(
            wide(actual), expected, rtol=RTOL, atol=ATOL, err_msg=f"{what}, output {index}"
        )


def cpu_session(model: Any) -> Any:
    return onnxruntime.InferenceSession(model.SerializeToString(), providers=[CPU])


def run_model(model: Any, program: CompiledProgram, args: list[np.ndarray]) -> list[np.ndarray]:
    """The emitted model in a plain ONNX Runtime session, outputs as the program declares."""
    session = cpu_session(model)
    feeds = {str(spec.name): arg for spec, arg in zip(program.input_specs, args, strict=True)}
    names = [str(spec.name) for spec in program.output_specs]
    return [np.asarray(value) for value in session.run(names, feeds)]


def validated(model: Any) -> Any:
    """``model`` with inferred value infos, through ONNX's full checker."""
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(inferred, full_check=True)
    return inferred


def node_types(model: Any) -> list[str]:
    return [node.op_type for node in model.graph.node]


def initializers(model: Any) -> dict[str, np.ndarray]:
    return {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}


# -- fp32: emitted models compute what NumPy computes ----------------------------------


@pytest.mark.parametrize("passes", [False, True], ids=["traced", "ane-passes"])
@pytest.mark.parametrize("name", list(CASES))
def test_onnx_backend_matches_numpy(name: str, passes: bool, rng: np.random.Generator) -> None:
    case = CASES[name]
    args = inputs_of(case, rng)
    program = anekit.compile(case.fn, *args, passes=passes)
    want = [np.asarray(value) for value in as_list(case.ref(*args))]
    got = as_list(program(*args, backend="onnx"))
    assert_matches(got, want, f"{name} on the onnx backend")
    report = program.last_run
    assert report is not None and report.backend == "onnx"
    assert not report.simulated and report.numerics is None


@pytest.mark.parametrize("name", list(CASES))
def test_to_onnx_model_is_valid_and_matches_numpy(name: str, rng: np.random.Generator) -> None:
    case = CASES[name]
    args = inputs_of(case, rng)
    program = anekit.compile(case.fn, *args, passes=False)
    model = to_onnx(program)
    assert [opset.version for opset in model.opset_import if opset.domain in ("", "ai.onnx")] == [
        OPSET
    ]
    inferred = validated(model)
    # Inputs and outputs are named, typed and shaped as the program declares them.
    assert [value.name for value in model.graph.input] == [
        str(spec.name) for spec in program.input_specs
    ]
    assert [value.name for value in model.graph.output] == [
        str(spec.name) for spec in program.output_specs
    ]
    for value, spec in zip(inferred.graph.output, program.output_specs, strict=True):
        dims = tuple(dim.dim_value for dim in value.type.tensor_type.shape.dim)
        assert dims == spec.shape, value.name
    want = [np.asarray(value) for value in as_list(case.ref(*args))]
    assert_matches(run_model(model, program, args), want, f"{name} emitted")


def test_emitted_model_passes_the_onnx_checker_as_emitted(rng: np.random.Generator) -> None:
    program = anekit.compile(ffn, activation(rng), passes=False)
    onnx.checker.check_model(to_onnx(program))


def test_to_onnx_takes_a_mil_program_and_a_function_name(rng: np.random.Generator) -> None:
    x = activation(rng)
    program = anekit.compile(ffn, x, passes=False)
    from_mil = to_onnx(program.program, program.function_name)
    assert from_mil.SerializeToString() == to_onnx(program).SerializeToString()
    assert from_mil.SerializeToString() == to_onnx(program.program).SerializeToString()
    assert_matches(run_model(from_mil, program, [x]), [ffn_ref(x)], "from the MIL program")


# -- fused operators and initializers --------------------------------------------------


@pytest.mark.parametrize(
    "name", [name for name in CASES if CASES[name].fused or CASES[name].absent]
)
def test_fused_operators_replace_their_expansions(name: str, rng: np.random.Generator) -> None:
    case = CASES[name]
    program = anekit.compile(case.fn, *inputs_of(case, rng), passes=False)
    types = set(node_types(to_onnx(program)))
    assert case.fused <= types, f"{name}: {sorted(types)}"
    assert not case.absent & types, f"{name}: {sorted(types)}"


def _attributes(node: Any) -> dict[str, Any]:
    return {attr.name: onnx.helper.get_attribute_value(attr) for attr in node.attribute}


def _only(model: Any, op_type: str) -> Any:
    nodes = [node for node in model.graph.node if node.op_type == op_type]
    assert len(nodes) == 1, f"{op_type}: {node_types(model)}"
    return nodes[0]


def test_fused_operator_attributes(rng: np.random.Generator) -> None:
    x = activation(rng)
    exact = _only(to_onnx(anekit.compile(ffn, x, passes=False)), "Gelu")
    assert _attributes(exact)["approximate"] == b"none"
    tanh = _only(to_onnx(anekit.compile(ffn_tanh, x, passes=False)), "Gelu")
    assert _attributes(tanh)["approximate"] == b"tanh"

    last = to_onnx(anekit.compile(layer_norm_last, x, passes=False))
    norm = _attributes(_only(last, "LayerNormalization"))
    assert norm["axis"] == 2
    assert norm["epsilon"] == pytest.approx(LN_EPS, rel=1e-6)
    two = _attributes(
        _only(to_onnx(anekit.compile(layer_norm_two, x, passes=False)), "LayerNormalization")
    )
    assert two["axis"] == 1

    bias = key_bias(rng)
    softmax = _only(to_onnx(anekit.compile(attention, x, bias, passes=False)), "Softmax")
    assert _attributes(softmax)["axis"] == 2


def test_layer_norm_parameters_are_initializers(rng: np.random.Generator) -> None:
    model = to_onnx(anekit.compile(layer_norm_two, activation(rng), passes=False))
    node = _only(model, "LayerNormalization")
    values = initializers(model)
    np.testing.assert_array_equal(values[node.input[1]], GAMMA2)
    np.testing.assert_array_equal(values[node.input[2]], BETA2)


def test_weights_are_initializers_not_inputs(rng: np.random.Generator) -> None:
    x = activation(rng)
    model = to_onnx(anekit.compile(ffn, x, passes=False))
    assert [value.name for value in model.graph.input] == ["x"]
    matmuls = [node for node in model.graph.node if node.op_type == "MatMul"]
    assert len(matmuls) == 2
    values = initializers(model)
    # The constant operand of each MatMul is the weight, stored as float32, transposed.
    for node, w in zip(matmuls, (W1, W2), strict=True):
        assert node.input[1] in values, f"{node.input[1]} is not an initializer"
        stored = values[node.input[1]]
        assert stored.dtype == F32
        np.testing.assert_array_equal(stored, w.T)
    assert any(np.array_equal(value, B1) for value in values.values())
    assert any(np.array_equal(value, B2) for value in values.values())


# -- int8: per-channel dynamic quantization --------------------------------------------


@pytest.fixture(scope="module")
def fp32_ffn_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    x = np.zeros((2, 16, 32), F32)
    program = anekit.compile(ffn, x, passes=False)
    return save_onnx(to_onnx(program), tmp_path_factory.mktemp("onnx") / "ffn.onnx")


def _quantized_weights(model: Any) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """MatMulInteger weight name -> (int8 weight, scale, zero point)."""
    values = initializers(model)
    found = {}
    for node in model.graph.node:
        if node.op_type != "MatMulInteger":
            continue
        name = node.input[1]
        assert name in values and name.endswith("_quantized"), f"{name}: not a stored weight"
        base = name.removesuffix("_quantized")
        found[name] = (values[name], values[f"{base}_scale"], values[node.input[3]])
    return found


def test_quantize_int8_stores_per_channel_int8_weights(fp32_ffn_path: Path, tmp_path: Path) -> None:
    target = quantize_int8(fp32_ffn_path, tmp_path / "deep" / "ffn.int8.onnx", form="s8")
    assert target == tmp_path / "deep" / "ffn.int8.onnx" and target.is_file()
    model = onnx.load(str(target))
    onnx.checker.check_model(model)
    types = node_types(model)
    assert types.count("MatMulInteger") == 2
    assert types.count("DynamicQuantizeLinear") == 2  # the activations, at run time
    assert "MatMul" not in types
    weights = _quantized_weights(model)
    assert len(weights) == 2
    for (stored, scale, zero), w in zip(weights.values(), (W1, W2), strict=True):
        assert stored.dtype == np.int8 and stored.shape == w.T.shape
        channels = w.shape[0]
        assert scale.shape == (channels,), "one scale per output channel"
        assert zero.shape == (channels,) and not zero.any()
        # Symmetric per output channel: the channel's largest |weight| maps to 127 ...
        np.testing.assert_allclose(scale * 127, np.abs(w).max(axis=1), rtol=1e-6)
        # ... and every weight is within half a step of its stored value.
        error = np.abs(stored.astype(F64) * scale - w.T)
        assert (error <= scale / 2 * (1 + 1e-5)).all()
    # The fp32 initializers of the weights are gone: the model holds int8 weights.
    assert not any(
        value.dtype == F32 and value.shape in {W1.T.shape, W2.T.shape}
        for value in initializers(model).values()
    )


def test_u8_form_stores_uint8_weights_per_channel(fp32_ffn_path: Path, tmp_path: Path) -> None:
    """The form for machines whose u8 x s8 kernels saturate: uint8 weights, a scale and
    a zero point per output channel (ONNX Runtime's QUInt8), each weight within half a
    step; and its products stay within 0.999 cosine of the float64 reference."""
    model = onnx.load(str(quantize_int8(fp32_ffn_path, tmp_path / "u8.onnx", form="u8")))
    onnx.checker.check_model(model)
    weights = _quantized_weights(model)
    assert len(weights) == 2
    for (stored, scale, zero), w in zip(weights.values(), (W1, W2), strict=True):
        assert stored.dtype == np.uint8 and stored.shape == w.T.shape
        assert scale.shape == (w.shape[0],) and zero.shape == (w.shape[0],)
        assert zero.dtype == np.uint8
        error = np.abs((stored.astype(F64) - zero.astype(F64)) * scale - w.T)
        assert (error <= scale / 2 * (1 + 1e-5)).all()
    x = activation(np.random.default_rng(3))
    (got,) = session_for(model.SerializeToString(), gpu=False).run(None, {"x": x})
    assert _cosine(got, ffn_ref(x)) >= 0.999


def test_an_unknown_weight_form_is_refused(fp32_ffn_path: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"int8 weight form must be one of s8, u8, got 'u4'"):
        quantize_int8(fp32_ffn_path, tmp_path / "x.onnx", form="u4")


def test_the_default_form_is_exact_where_paired_products_overflow_int16(tmp_path: Path) -> None:
    """Activations at the top of uint8 times weights at +-127: two products in a row
    overflow int16, which AVX2's u8 x s8 kernel saturates. The int8 weights then err by
    more than 10 % on such a machine (exactly where the probe says so), and the form this
    machine gets by default does not."""
    w = np.where(np.arange(64)[None, :] % 3 == 0, -1.0, 1.0).astype(F32) * np.ones((8, 1), F32)

    def matmul(x: Any) -> Any:
        return x @ w.T

    x = np.full((4, 64), 4.0, F32)
    x[:, 0] = 0.0  # the activation range starts at 0: uint8 levels up to 255
    source = save_onnx(to_onnx(anekit.compile(matmul, x, passes=False)), tmp_path / "m.onnx")
    want = wide(x) @ wide(w).T

    def error(form: str | None) -> float:
        model = quantize_int8(source, tmp_path / f"{form}.onnx", form=form)
        (got,) = session_for(model, gpu=False).run(None, {"x": x})
        return float(np.abs(wide(got) - want).max() / np.abs(want).max())

    assert error(None) < 0.01
    assert error("u8") < 0.01
    assert (error("s8") > 0.1) == u8s8_saturates()


def test_quantize_int8_per_tensor_has_one_scale_per_weight(
    fp32_ffn_path: Path, tmp_path: Path
) -> None:
    target = quantize_int8(fp32_ffn_path, tmp_path / "t.onnx", per_channel=False, form="s8")
    weights = _quantized_weights(onnx.load(str(target)))
    assert len(weights) == 2
    for (stored, scale, zero), w in zip(weights.values(), (W1, W2), strict=True):
        assert stored.dtype == np.int8
        assert scale.size == 1 and zero.size == 1 and int(zero.reshape(-1)[0]) == 0
        np.testing.assert_allclose(float(scale.reshape(-1)[0]) * 127, np.abs(w).max(), rtol=1e-6)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = wide(a).ravel(), wide(b).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_int8_mode_stays_close_to_fp32(rng: np.random.Generator) -> None:
    x = activation(rng)
    program = anekit.compile(ffn, x, passes=False)
    want = ffn_ref(x)
    fp32 = program(x, backend="onnx")
    assert program.last_run is not None and "(fp32)" in program.last_run.device
    int8 = program(x, backend="onnx", mode="int8")
    assert program.last_run is not None and "(int8)" in program.last_run.device
    # The model that ran holds int8 weights, one scale per output channel.
    ran = program._sessions["onnx:int8"].model
    assert node_types(ran).count("MatMulInteger") == 2 and "MatMul" not in node_types(ran)
    form_dtype = np.int8 if weight_form() == "s8" else np.uint8  # anekit.package.int8_kernels
    for (stored, scale, _), w in zip(_quantized_weights(ran).values(), (W1, W2), strict=True):
        assert stored.dtype == form_dtype and scale.shape == (w.shape[0],)
    assert int8.dtype == F32 and int8.shape == want.shape
    assert _cosine(int8, want) >= 0.98
    # ... and it did quantize: fp32 is far closer to the reference than int8 is.
    int8_error = np.abs(wide(int8) - want).max()
    assert int8_error > 1e-3
    assert np.abs(wide(fp32) - want).max() < int8_error / 100


@pytest.mark.parametrize("passes", [False, True], ids=["matmul", "ane-passes-conv"])
def test_int8_mode_is_per_channel(tmp_path: Path, rng: np.random.Generator, passes: bool) -> None:
    """Output channels of very different sizes: per channel keeps each one accurate,
    one scale per tensor rounds the small channels away. With the ANE passes the
    matmul is a 1x1 convolution, and it must be per channel too."""
    sizes = np.logspace(-3, 0, 16)
    w = (rng.standard_normal((16, 64)) * sizes[:, None]).astype(F32)

    def skewed(x: Any) -> Any:
        return x @ w.T

    x = rng.standard_normal((4, 64)).astype(F32)
    want = wide(x) @ wide(w).T
    program = anekit.compile(skewed, x, passes=passes)
    assert ("Conv" in node_types(to_onnx(program))) == passes

    def worst_channel(got: np.ndarray) -> float:
        error = np.abs(wide(got) - want).max(axis=0) / np.abs(want).max(axis=0)
        return float(error.max())

    assert worst_channel(program(x, backend="onnx", mode="int8")) < 0.05
    source = save_onnx(to_onnx(program), tmp_path / "skewed.onnx")
    per_tensor = quantize_int8(source, tmp_path / "skewed.t.onnx", per_channel=False)
    session = session_for(per_tensor, gpu=False)
    (got,) = session.run(["output"], {"x": x})
    assert worst_channel(got[:, :16]) > 0.5  # the ANE passes pad the output to 32 wide


def _matmul_weight_scales(model: Any) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(stored weight, scale, zero point) of each MatMulInteger, in graph order."""
    values = initializers(model)
    found = []
    for node in model.graph.node:
        if node.op_type == "MatMulInteger":
            name = node.input[1]
            scale = values[name.removesuffix("_quantized") + "_scale"]
            found.append((values[name], scale, values[node.input[3]]))
    return found


def test_int8_mode_quantizes_programs_compiled_with_ane_passes(
    rng: np.random.Generator,
) -> None:
    """The ANE passes make the matmuls 1x1 convolutions: int8 mode turns them back into
    MatMul (ONNX Runtime's Conv quantizer ignores ``per_channel``), so their weights
    get one scale per output channel, and stays within the measured tolerance of
    fp32."""
    x = activation(rng)
    program = anekit.compile(ffn, x)  # passes on, as anekit.compile defaults
    want = ffn_ref(x)
    fp32 = program(x, backend="onnx")
    int8 = program(x, backend="onnx", mode="int8")
    plain = node_types(program._sessions["onnx:"].model)
    ran = program._sessions["onnx:int8"].model
    onnx.checker.check_model(ran)
    types = node_types(ran)
    assert plain.count("Conv") == 2 and "MatMul" not in plain
    assert types.count("MatMulInteger") == 2
    assert "Conv" not in types and "ConvInteger" not in types
    assert types.count("DynamicQuantizeLinear") == 2  # the activations, at run time
    weights = _matmul_weight_scales(ran)
    assert len(weights) == 2
    for (stored, scale, zero), w in zip(weights, (W1, W2), strict=True):
        assert stored.dtype == (np.int8 if weight_form() == "s8" else np.uint8)
        assert stored.shape == w.T.shape
        assert scale.shape == (w.shape[0],), "one scale per output channel"
        if weight_form() == "s8":  # symmetric: the largest |w| of a channel maps to 127
            np.testing.assert_allclose(scale * 127, np.abs(w).max(axis=1), rtol=1e-6)
        error = np.abs((stored.astype(F64) - zero.astype(F64)) * scale - w.T)
        assert (error <= scale / 2 * (1 + 1e-5)).all()
    values = initializers(ran)
    assert not any(
        value.dtype == F32 and value.size in (W1.size, W2.size) for value in values.values()
    ), "an fp32 copy of a weight is still in the model"
    # Close to fp32 (measured: cosine 0.99990), yet not fp32: quantization shows.
    assert _cosine(int8, fp32) >= 0.999 and _cosine(int8, want) >= 0.999
    int8_error = np.abs(wide(int8) - want).max()
    assert int8_error > 1e-3
    assert np.abs(wide(fp32) - want).max() < int8_error / 100


def _conv_model(
    weight: np.ndarray,
    bias: np.ndarray | None,
    shape: tuple[int, ...],
    out: tuple[int, ...],
    **attributes: Any,
) -> Any:
    """One float32 Conv (weight and bias as initializers): ``shape`` -> ``out``."""
    from onnx import TensorProto, helper, numpy_helper

    names = ["w"] + ([] if bias is None else ["b"])
    tensors = [numpy_helper.from_array(weight, "w")]
    if bias is not None:
        tensors.append(numpy_helper.from_array(bias, "b"))
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", *names], ["y"], **attributes)],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out))],
        tensors,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 10
    return model


def _run(model: Any, x: np.ndarray) -> np.ndarray:
    session = session_for(model.SerializeToString(), gpu=False)
    return np.asarray(session.run(None, {"x": x})[0])


@pytest.mark.parametrize(
    ("shape", "bias"),
    [((2, 24, 1, 10), True), ((2, 24, 3, 5), False), ((2, 24, 7), True)],
    ids=["b-c-1-s", "b-c-h-w", "conv1d"],
)
def test_1x1_convs_become_matmuls_that_compute_the_same(
    rng: np.random.Generator, shape: tuple[int, ...], bias: bool
) -> None:
    rank = len(shape) - 2
    w = weight(16, 24, *([1] * rank))
    b = weight(16, scale=0.5) if bias else None
    out = (shape[0], 16, *shape[2:])
    model = _conv_model(w, b, shape, out, pads=[0] * 2 * rank, strides=[1] * rank)
    x = rng.standard_normal(shape).astype(F32)
    want = _run(model, x)
    assert convs_as_matmuls(model) == 1
    onnx.checker.check_model(model)
    assert node_types(model) == ["Transpose", "MatMul"] + ["Add"] * bias + ["Transpose"]
    assert {item.name for item in model.graph.initializer} == {"w_matmul"} | (
        {"b_matmul"} if bias else set()
    )
    np.testing.assert_allclose(_run(model, x), want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("form", WEIGHT_FORMS)
def test_other_convs_are_quantized_per_channel(
    tmp_path: Path, rng: np.random.Generator, form: str
) -> None:
    """A 3x3 convolution (stride 2, padded) is no matmul: it gets ConvInteger, with
    one scale per output channel, where ONNX Runtime's own quantizer keeps one; in
    either weight form (uint8: the same levels plus 128, zero point 128)."""
    sizes = np.logspace(-3, 0, 8).astype(F32)
    w = weight(8, 6, 3, 3) * sizes[:, None, None, None]
    b = weight(8, scale=0.01)
    attributes = {"pads": [1, 1, 1, 1], "strides": [2, 2], "kernel_shape": [3, 3]}
    model = _conv_model(w, b, (2, 6, 9, 9), (2, 8, 5, 5), **attributes)
    assert convs_as_matmuls(model) == 0
    source = save_onnx(model, tmp_path / "conv.onnx")
    x = rng.standard_normal((2, 6, 9, 9)).astype(F32)
    want = _run(model, x)
    quantized = onnx.load(str(quantize_int8(source, tmp_path / "conv.int8.onnx", form=form)))
    onnx.checker.check_model(quantized)
    types = node_types(quantized)
    assert types.count("ConvInteger") == 1 and "Conv" not in types
    (conv,) = [node for node in quantized.graph.node if node.op_type == "ConvInteger"]
    assert {item.name: onnx.helper.get_attribute_value(item) for item in conv.attribute} == {
        "pads": [1, 1, 1, 1],
        "strides": [2, 2],
        "kernel_shape": [3, 3],
    }
    values = initializers(quantized)
    stored, scale = values[conv.input[1]], values[conv.input[1] + "_scale"]
    zero = values[conv.input[3]]
    assert stored.shape == w.shape and zero.shape == ()
    want_dtype, want_zero = (np.dtype(np.int8), 0) if form == "s8" else (np.dtype(np.uint8), 128)
    assert stored.dtype == want_dtype and zero.dtype == want_dtype and int(zero) == want_zero
    assert scale.shape == (1, 8, 1, 1), "one scale per output channel"
    np.testing.assert_allclose(scale.reshape(-1) * 127, np.abs(w).reshape(8, -1).max(1), rtol=1e-6)
    levels = stored.astype(np.int16) - int(zero)  # symmetric: the largest |w| maps to 127
    assert np.abs(levels).reshape(8, -1).max(1).tolist() == [127] * 8
    assert not any(value.dtype == F32 and value.shape == w.shape for value in values.values())

    def worst_channel(got: np.ndarray) -> float:
        error = np.abs(got - want).max(axis=(0, 2, 3)) / np.abs(want).max(axis=(0, 2, 3))
        return float(error.max())

    assert worst_channel(_run(quantized, x)) < 0.05
    per_tensor = onnx.load(str(quantize_int8(source, tmp_path / "t.onnx", per_channel=False)))
    assert worst_channel(_run(per_tensor, x)) > 0.5


def test_unknown_mode_is_refused(rng: np.random.Generator) -> None:
    x = activation(rng)
    program = anekit.compile(ffn, x, passes=False)
    assert MODES == ("fp32", "int8")
    with pytest.raises(errors.ProgramError, match=r"onnx backend modes are fp32, int8, got 'fp16'"):
        OnnxBackend().load(program.load_request(), mode="fp16")
    with pytest.raises(errors.ProgramError, match="onnx backend modes"):
        program(x, backend="onnx", mode="ane")


# -- errors ----------------------------------------------------------------------------


def test_op_without_lowering_is_named(rng: np.random.Generator) -> None:
    x = activation(rng)
    program = anekit.compile(lambda x: np.cumsum(x, axis=-1) * 2, x, passes=False)
    with pytest.raises(
        errors.ProgramError, match=r"cumsum_\d+: ONNX emission has no lowering for cumsum"
    ):
        to_onnx(program)
    with pytest.raises(errors.ProgramError, match="no lowering for cumsum"):
        program(x, backend="onnx")


def test_op_variant_that_cannot_be_emitted_is_named() -> None:
    ids = np.arange(6, dtype=np.int32).reshape(2, 3)
    program = anekit.compile(lambda i: i // 2, ids, passes=False)
    with pytest.raises(
        errors.ProgramError, match=r"floor_div_\d+ \(floor_div\): cannot be emitted"
    ):
        to_onnx(program)


def test_integer_inputs_and_outputs(rng: np.random.Generator) -> None:
    ids = rng.integers(0, 10, (2, 3)).astype(np.int32)
    x = rng.standard_normal((2, 3)).astype(F32)
    table = weight(10, 4)

    def fn(i: Any, x: Any) -> Any:
        return {"rows": nn.embedding(i, table) * 2, "next": i + 1, "best": np.argmax(x, axis=-1)}

    program = anekit.compile(fn, ids, x, passes=False)
    got = program(ids, x, backend="onnx")
    np.testing.assert_array_equal(got["rows"], table[ids] * 2)
    assert got["next"].dtype == np.int32
    np.testing.assert_array_equal(got["next"], ids + 1)
    np.testing.assert_array_equal(got["best"], np.argmax(x, axis=-1))


def test_float16_programs_run(rng: np.random.Generator) -> None:
    x = rng.standard_normal((2, 40)).astype(np.float16)
    program = anekit.compile(lambda x: x * 2 + 1, x, passes=False)
    got = program(x, backend="onnx")
    np.testing.assert_allclose(wide(got), wide(x) * 2 + 1, rtol=1e-3)


@pytest.mark.parametrize("reduce", ["max", "min", "prod"])
def test_max_min_prod_reductions(reduce: str, rng: np.random.Generator) -> None:
    x = activation(rng)
    reducers: dict[str, Callable[..., Any]] = {"max": np.max, "min": np.min, "prod": np.prod}
    fn = reducers[reduce]
    program = anekit.compile(lambda x: fn(x, axis=1), x, passes=False)
    np.testing.assert_allclose(program(x, backend="onnx"), fn(wide(x), axis=1), rtol=RTOL)


# -- backend selection, run reports, providers -----------------------------------------


def test_select_backend_onnx() -> None:
    backend = select_backend("onnx")
    assert isinstance(backend, OnnxBackend)
    assert backend.name == "onnx" and RUNTIMES["onnx"].available()
    assert "onnx" in available_backends()
    assert select_backend(None).name != "onnx"  # only when asked for by name


def test_run_report_after_predict(rng: np.random.Generator) -> None:
    x = activation(rng)
    program = anekit.compile(ffn, x, passes=False)
    session = select_backend("onnx").load(program.load_request())
    assert isinstance(session, OnnxSession)
    before: RunReport | None = session.last_run
    assert before is None
    outputs = session.predict({"x": x})
    assert list(outputs) == ["output"]
    assert_matches([outputs["output"]], [ffn_ref(x)], "predict")
    report = session.last_run
    assert report is not None
    # CUDA when onnxruntime-gpu found a GPU (the session says), else the CPU.
    device = "GPU (CUDA)" if CUDA in session.session.get_providers() else "CPU"
    assert session.session.get_providers()[-1] == CPU
    assert session.device == device
    assert report.backend == "onnx" and report.simulated is False
    assert report.device == f"{device} via ONNX Runtime (fp32)"
    assert report.seconds > 0 and report.numerics is None
    assert "measured" in report.describe() and "simulated" not in report.describe()


def test_providers_end_with_the_cpu() -> None:
    chosen = providers()
    available = onnxruntime.get_available_providers()
    assert chosen[-1] == CPU and chosen.count(CPU) == 1
    assert set(chosen) <= set(available)
    assert (CUDA in chosen) == (CUDA in available)
    if CUDA not in available:
        assert chosen == [CPU]


def test_providers_prefer_cuda_and_ignore_others(monkeypatch: pytest.MonkeyPatch) -> None:
    OnnxRuntime(available=("AzureExecutionProvider", CPU)).install(monkeypatch)
    assert providers() == [CPU]
    OnnxRuntime(
        available=("TensorrtExecutionProvider", CUDA, "AzureExecutionProvider", CPU)
    ).install(monkeypatch)
    assert providers() == [CUDA, CPU]
    assert providers("cpu") == [CPU] and providers("cuda") == [CUDA, CPU]
    with pytest.raises(ValueError, match="device must be one of auto, cpu, cuda"):
        providers("gpu")


@pytest.fixture
def ffn_bytes(rng: np.random.Generator) -> bytes:
    return bytes(to_onnx(anekit.compile(ffn, activation(rng), passes=False)).SerializeToString())


def test_cpu_sessions_ask_for_the_cpu_only_where_cuda_works(
    monkeypatch: pytest.MonkeyPatch, ffn_bytes: bytes
) -> None:
    ort = OnnxRuntime(available=(CUDA, CPU), working=(CUDA, CPU)).install(monkeypatch)
    for session in (session_for(ffn_bytes, device="cpu"), session_for(ffn_bytes, gpu=False)):
        assert session.get_providers() == [CPU]
    assert ort.requested() == [[CPU], [CPU]]
    auto = session_for(ffn_bytes)  # auto: CUDA where it works
    assert auto.get_providers() == [CUDA, CPU]
    assert OnnxSession(auto, "fp32").device == "GPU (CUDA)"


def test_gpu_tests_skip_with_the_reason_where_cuda_cannot_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """tests/conftest.py skips tests marked ``gpu`` on what the one-op probe gets, not on
    the provider list: an onnxruntime-gpu that lists CUDA but cannot load it skips
    (with ONNX Runtime's answer) instead of failing."""
    from conftest import gpu_skip_reason

    OnnxRuntime(available=(CUDA, CPU), working=(CPU,)).install(monkeypatch)
    reason = gpu_skip_reason()
    assert reason is not None
    assert f"lists {CUDA} but cannot use it" in reason
    assert f"built the session on {CPU}, not {CUDA}" in reason
    OnnxRuntime(available=(CPU,), working=(CPU,)).install(monkeypatch)
    reason = gpu_skip_reason()
    assert reason is not None and f"has no {CUDA}" in reason
    OnnxRuntime(available=(CUDA, CPU), working=(CUDA, CPU)).install(monkeypatch)
    assert gpu_skip_reason() is None


@pytest.mark.parametrize("runtime", ["real", "stand-in"])
def test_cuda_sessions_that_fall_back_to_the_cpu_are_refused(
    monkeypatch: pytest.MonkeyPatch, ffn_bytes: bytes, runtime: str
) -> None:
    """ONNX Runtime builds a CPU session without an error when CUDA cannot load;
    ``device="cuda"`` reads the providers back and refuses it."""
    if runtime == "real":
        from conftest import gpu_skip_reason

        if gpu_skip_reason() is None:
            pytest.skip("CUDA really works here")
        monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: [CUDA, CPU])
    else:
        OnnxRuntime(available=(CUDA, CPU), working=(CPU,)).install(monkeypatch)
    quiet = pytest.warns(UserWarning, match="not in available provider names")
    with quiet if runtime == "real" else contextlib.nullcontext():
        auto = session_for(ffn_bytes)  # asks for CUDA first, gets the CPU
    assert auto.get_providers() == [CPU]
    session = OnnxSession(auto, "fp32")
    assert session.device == "CPU" and session.providers == [CPU]
    session.predict({"x": activation(np.random.default_rng(1))})
    assert session.last_run is not None
    assert session.last_run.device == "CPU via ONNX Runtime (fp32)"
    with (
        quiet if runtime == "real" else contextlib.nullcontext(),
        pytest.raises(ProviderMismatch, match=f"built the session on {CPU}, not {CUDA}") as raised,
    ):
        session_for(ffn_bytes, device="cuda")
    assert raised.value.providers == [CPU]
    assert isinstance(raised.value, errors.BackendUnavailableError)
    with quiet if runtime == "real" else contextlib.nullcontext(), pytest.raises(ProviderMismatch):
        probe("cuda")
    assert probe("cpu") == [CPU]


def test_the_probe_sees_cuda_where_it_works(monkeypatch: pytest.MonkeyPatch) -> None:
    ort = OnnxRuntime(available=(CUDA, CPU), working=(CUDA, CPU)).install(monkeypatch)
    assert probe("cuda") == [CUDA, CPU]
    assert ort.requested() == [[CUDA, CPU]]


def test_session_for_paths_bytes_and_cpu_only(tmp_path: Path, rng: np.random.Generator) -> None:
    x = activation(rng)
    model = to_onnx(anekit.compile(ffn, x, passes=False))
    path = save_onnx(model, tmp_path / "nested" / "ffn.onnx")
    assert path.is_file()
    want = ffn_ref(x)
    for source in (path, model.SerializeToString()):
        session = session_for(source, threads=1, gpu=False)
        assert session.get_providers() == [CPU]
        (got,) = session.run(["output"], {"x": x})
        np.testing.assert_allclose(wide(got), want, rtol=RTOL, atol=ATOL)
        assert OnnxSession(session, "fp32").device == "CPU"

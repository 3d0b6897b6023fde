"""Calibrated int8 activation scales (anekit.package.activation_scales) on a small MLP block
with the outlier transformers have in a LayerNorm output (one channel 30x the others),
and on a down projection alone with one loud row. MiniLM's fidelity with them is tested in
test_onnx_embedder.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from anekit.package import activation_scales
from anekit.package.int8_kernels import WEIGHT_FORMS, u8s8_saturates
from anekit.package.onnx_int8 import quantize_int8

WIDTH, HIDDEN = 16, 64
RNG = np.random.default_rng(7)
W_UP = RNG.normal(0, 0.3, (WIDTH, HIDDEN)).astype(np.float32)
W_DOWN = RNG.normal(0, 0.3, (HIDDEN, WIDTH)).astype(np.float32)
GAMMA = np.ones(WIDTH, np.float32)
GAMMA[3] = 30.0  # an outlier channel of the LayerNorm output


def block() -> onnx.ModelProto:
    """x (B, S, 16) -> LayerNorm -> MatMul (16 -> 64) -> Gelu -> MatMul (64 -> 16)."""
    nodes = [
        helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["normed"], axis=-1),
        helper.make_node("MatMul", ["normed", "w_up"], ["up"]),
        helper.make_node("Gelu", ["up"], ["hidden"]),
        helper.make_node("MatMul", ["hidden", "w_down"], ["y"]),
    ]
    initializers = [
        numpy_helper.from_array(GAMMA, "gamma"),
        numpy_helper.from_array(np.zeros(WIDTH, np.float32), "beta"),
        numpy_helper.from_array(W_UP, "w_up"),
        numpy_helper.from_array(W_DOWN, "w_down"),
    ]
    graph = helper.make_graph(
        nodes,
        "block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", WIDTH])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "sequence", WIDTH]),
            helper.make_tensor_value_info("up", TensorProto.FLOAT, ["batch", "sequence", HIDDEN]),
        ],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def rows(count: int) -> np.ndarray:
    return RNG.normal(0, 1, (1, count, WIDTH)).astype(np.float32)


def run(
    model: onnx.ModelProto | Path, x: np.ndarray, name: str = "x", output: str = "y"
) -> np.ndarray:
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    session = onnxruntime.InferenceSession(source, providers=["CPUExecutionProvider"])
    return np.asarray(session.run([output], {name: x})[0])


@pytest.fixture(scope="module")
def calibration() -> list[dict[str, np.ndarray]]:
    return [{"x": rows(int(RNG.integers(3, 20)))} for _ in range(24)]


@pytest.fixture(scope="module")
def models(
    tmp_path_factory: pytest.TempPathFactory, calibration: list[dict[str, np.ndarray]]
) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("scales")
    source = folder / "block.onnx"
    onnx.save(block(), str(source))
    return {
        "fp32": source,
        "dynamic": quantize_int8(source, folder / "dynamic.onnx"),
        "calibrated": quantize_int8(source, folder / "calibrated.onnx", calibration=calibration),
    }


def test_smoothing_keeps_the_float32_function(calibration: list[dict[str, np.ndarray]]) -> None:
    model = block()
    sources = ["normed"]
    found = activation_scales.input_statistics(model, sources, calibration)
    peaks = {"normed": found["normed"].peaks}
    assert peaks["normed"].shape == (WIDTH,) and peaks["normed"].argmax() == 3
    assert len(found["normed"].row_spreads) == len(calibration)
    assert activation_scales.smooth(model, peaks) == ["normed"]
    weight = {item.name: numpy_helper.to_array(item) for item in model.graph.initializer}
    factors = weight["w_up"] / W_UP
    assert factors[3].mean() > 3 * np.median(factors)  # the outlier channel moved most
    (mul,) = [node for node in model.graph.node if node.op_type == "Mul"]
    assert mul.input[0] == "normed"
    x = rows(9)
    np.testing.assert_allclose(run(model, x), run(block(), x), rtol=1e-4, atol=1e-4)


def test_smoothing_loses_less_of_a_layernorm_output_with_an_outlier_channel(
    models: dict[str, Path],
) -> None:
    """The up projection reads a LayerNorm output whose channel 3 is 30x the others: with
    one scale per run the other channels get few levels; smoothed, they keep more."""

    def error(name: str, x: np.ndarray) -> float:
        want = run(models["fp32"], x, output="up")
        got = run(models[name], x, output="up")
        return float(np.abs(got - want).max() / np.abs(want).max())

    draws = [rows(12) for _ in range(10)]
    dynamic = np.median([error("dynamic", x) for x in draws])
    calibrated = np.median([error("calibrated", x) for x in draws])
    assert calibrated < 0.75 * dynamic


def down_projection() -> onnx.ModelProto:
    """hidden (B, S, 64) -> MatMul (64 -> 16): a down projection alone."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["hidden", "w_down"], ["y"])],
        "down",
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "sequence", HIDDEN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "sequence", WIDTH])],
        [numpy_helper.from_array(W_DOWN, "w_down")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


@pytest.mark.parametrize("form", WEIGHT_FORMS)
def test_a_row_of_a_down_projection_does_not_depend_on_the_others(
    tmp_path: Path, form: str
) -> None:
    """Per-row scales: a row computes the same bits beside a loud row as beside quiet
    ones; with one scale per run it does not. In either weight form; the values are
    checked where the form is exact on this machine (anekit.package.int8_kernels)."""
    source = tmp_path / "down.onnx"
    onnx.save(down_projection(), str(source))
    hidden = RNG.normal(0, 1, (1, 6, HIDDEN)).astype(np.float32)
    loud = hidden.copy()
    loud[0, 5] *= 50
    calibration = [{"hidden": loud}]  # uneven rows: per-row scales (ROW_SPREAD)
    per_row = quantize_int8(source, tmp_path / "per_row.onnx", calibration=calibration, form=form)
    per_run = quantize_int8(source, tmp_path / "per_run.onnx", form=form)
    types = [node.op_type for node in onnx.load(str(per_row)).graph.node]
    assert "MatMulIntegerToFloat" in types and "MatMul" not in types
    quiet, beside_loud = run(per_row, hidden, "hidden"), run(per_row, loud, "hidden")
    assert np.array_equal(quiet[0, :5], beside_loud[0, :5])
    assert not np.array_equal(
        run(per_run, hidden, "hidden")[0, :5], run(per_run, loud, "hidden")[0, :5]
    )
    if form == "s8" and u8s8_saturates():
        return  # this machine's u8 x s8 kernel saturates: the other form is its default
    want = hidden @ W_DOWN
    assert np.abs(quiet - want).max() < 0.02 * np.abs(want).max()


def test_prepare_names_the_down_projections_with_uneven_rows() -> None:
    hidden = RNG.normal(0, 1, (1, 8, HIDDEN)).astype(np.float32)
    loud = hidden.copy()
    loud[0, 2] *= 3 * activation_scales.ROW_SPREAD
    even, uneven = down_projection(), down_projection()
    assert activation_scales.prepare(even, [{"hidden": hidden}]) == []
    (name,) = activation_scales.prepare(uneven, [{"hidden": loud}])
    (node,) = uneven.graph.node
    assert node.name == name
    layers = activation_scales.linear_layers(block())
    assert [layer.down_projection for layer in layers] == [False, True]
    assert [layer.source_op for layer in layers] == ["LayerNormalization", "Gelu"]


def test_bad_requests_are_named() -> None:
    model = block()
    with pytest.raises(ValueError, match="at least one calibration input"):
        activation_scales.input_statistics(model, ["normed"], [])
    with pytest.raises(ValueError, match="no float32 linear layer named"):
        activation_scales.per_token(model, ["nothing_here"])


def test_calibration_needs_per_channel_weights(tmp_path: Path) -> None:
    source = tmp_path / "block.onnx"
    onnx.save(block(), str(source))
    with pytest.raises(ValueError, match="per-channel"):
        quantize_int8(source, tmp_path / "t.onnx", per_channel=False, calibration=[{"x": rows(3)}])

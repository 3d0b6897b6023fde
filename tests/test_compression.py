"""Compressed weights: specs, the per-weight error check, bit-exact decompression in the
simulator, and ``anekit.compile(..., compress=...)`` end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anekit
from anekit.errors import ProgramError
from anekit.ops.defs.misc import decompressed
from anekit.package.compression import (
    MAX_ERROR,
    METADATA_KEY,
    PRESETS,
    WEIGHT_THRESHOLD,
    Compression,
    compress_model,
)

rng = np.random.default_rng(11)
GAUSSIAN = (rng.standard_normal((64, 128)) / 8).astype(np.float16)
#: Three distinct values: any palette of 2+ entries holds it exactly.
TERNARY = (rng.integers(-1, 2, (48, 64)) / 4).astype(np.float16)
X = rng.standard_normal((8, 128)).astype(np.float16)


def _dense(x: Any) -> Any:
    return np.tanh(x @ GAUSSIAN.T)


def _two_layers(x: Any) -> Any:
    return np.tanh(x @ GAUSSIAN.T) @ TERNARY.T


def _constexprs(program: anekit.CompiledProgram) -> list[Any]:
    function = program.lowered().functions["main"]
    return [op for op in function.operations if op.op_type.startswith("constexpr_")]


@pytest.mark.parametrize(
    ("spec", "method", "bits", "granularity", "size", "ios18"),
    [
        ("int8", "linear", 8, "per_channel", None, False),
        ("int4", "linear", 4, "per_channel", None, True),
        ("int8-b32", "linear", 8, "per_block", 32, True),
        ("int4-b64", "linear", 4, "per_block", 64, True),
        ("palettize4", "palettize", 4, "per_tensor", None, False),
        ("palettize3", "palettize", 3, "per_tensor", None, True),
        ("palettize6-g32", "palettize", 6, "per_grouped_channel", 32, True),
    ],
)
def test_specs_parse_and_name_themselves(
    spec: str, method: str, bits: int, granularity: str, size: int | None, ios18: bool
) -> None:
    parsed = Compression.parse(spec)
    assert parsed is not None
    assert (parsed.method, parsed.bits, parsed.granularity, parsed.size) == (
        method, bits, granularity, size,
    )  # fmt: skip
    assert parsed.name == spec and parsed.needs_ios18 is ios18
    assert parsed.bound == MAX_ERROR and parsed.with_max_error(0.05).bound == 0.05


def test_every_preset_parses_and_fp16_is_no_compression() -> None:
    assert Compression.parse("fp16") is None
    assert [Compression.parse(p).name for p in PRESETS if p != "fp16"] == list(PRESETS[1:])  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("int5", "unknown weight compression 'int5'"),
        ("palettize5", "a palette has 1, 2, 3, 4, 6, 8 bits, not 5"),
        ("int4-b0", "a block or group size is a positive number"),
        ("palettize4-x16", "unknown weight compression"),
    ],
)
def test_bad_specs_are_refused_by_name(spec: str, message: str) -> None:
    with pytest.raises(ProgramError, match=message):
        Compression.parse(spec)
    with pytest.raises(ProgramError, match="max_error must be a positive number"):
        Compression.parse("int8", max_error=0.0)


@pytest.mark.parametrize("spec", ["palettize4", "palettize4-g16", "int4-b32", "int8"])
def test_compressed_programs_run_their_decompressed_weights_in_the_simulator(spec: str) -> None:
    program = anekit.compile(_dense, X, compress=spec)
    got = np.asarray(program(X, backend="sim"), np.float32)
    (weight_op,) = _constexprs(program)[-1:]
    weight = np.asarray(decompressed(weight_op), np.float32).reshape(GAUSSIAN.shape)
    want = np.tanh(X.astype(np.float32) @ weight.T)
    np.testing.assert_allclose(got, want, atol=4e-3)  # fp16 activations
    plain = np.tanh(X.astype(np.float32) @ GAUSSIAN.T.astype(np.float32))
    assert np.abs(got - plain).max() > 1e-2  # the compressed weights, not the originals
    report = program.compression_report
    assert report is not None and report.spec == spec
    (outcome,) = report.weights
    assert outcome.compressed and outcome.shape[:2] == GAUSSIAN.shape
    error = np.linalg.norm(weight - GAUSSIAN) / np.linalg.norm(GAUSSIAN.astype(np.float32))
    assert outcome.error == pytest.approx(float(error), rel=1e-4)


def _expanded(table: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``table`` repeated along each axis to ``shape`` (a block per table entry)."""
    for axis, size in enumerate(shape):
        table = np.repeat(table, size // table.shape[axis], axis=axis)
    return table


def test_palette_decompression_is_bit_exact_to_the_ios18_definition() -> None:
    """constexpr_lut_to_dense (iOS18): each value is its group's palette entry at its
    index; lut is (*groups per axis, palette, 1)."""
    program = anekit.compile(_dense, X, compress="palettize4-g16")
    (op,) = _constexprs(program)
    assert op.op_type == "constexpr_lut_to_dense"
    indices = np.asarray(op.indices.val).astype(np.int64)
    lut = np.asarray(op.lut.val)
    assert lut.shape[0] == GAUSSIAN.shape[0] // 16 and lut.shape[-2:] == (16, 1)
    palettes = _expanded(lut[..., 0], (*indices.shape, 16))
    want = np.take_along_axis(palettes, indices[..., None], axis=-1)[..., 0]
    got = np.asarray(decompressed(op))
    assert got.dtype == np.float16 and got.tobytes() == want.astype(np.float16).tobytes()


def test_blockwise_decompression_is_bit_exact_to_the_ios18_definition() -> None:
    """constexpr_blockwise_shift_scale (iOS18): (data - offset) * scale, one scale per
    block; symmetric quantization has no offset."""
    program = anekit.compile(_dense, X, compress="int4-b32")
    (op,) = _constexprs(program)
    assert op.op_type == "constexpr_blockwise_shift_scale" and op.offset is None
    data = np.asarray(op.data.val)
    scale = np.asarray(op.scale.val)
    assert scale.shape[1] == GAUSSIAN.shape[1] // 32  # one scale per 32 inputs
    want = data.astype(np.float32) * _expanded(scale, data.shape).astype(np.float32)
    got = np.asarray(decompressed(op))
    assert got.tobytes() == want.astype(np.float16).tobytes()


def test_a_weight_over_the_bound_stays_fp16_and_is_reported() -> None:
    """The Gaussian weight loses ~10 % to a 4-bit palette, the ternary one nothing: a
    bound between them keeps the first in fp16 and compresses the second."""
    program = anekit.compile(
        _two_layers, X, compress=Compression.parse("palettize4", max_error=0.05)
    )
    out = program(X, backend="sim")
    report = program.compression_report
    assert report is not None
    by_shape = {w.shape[:2]: w for w in report.weights}
    gaussian, ternary = by_shape[GAUSSIAN.shape], by_shape[TERNARY.shape]
    assert ternary.compressed and ternary.error == 0.0
    assert not gaussian.compressed and gaussian.error is not None and gaussian.error > 0.05
    assert gaussian.kept_because == f"relative error {gaussian.error:.4g} above 0.05"
    (lut,) = _constexprs(program)
    assert np.asarray(decompressed(lut)).reshape(TERNARY.shape).tobytes() == TERNARY.tobytes()
    plain = anekit.compile(_two_layers, X)(X, backend="sim")
    np.testing.assert_array_equal(out, plain)  # the kept weight is the original fp16 one
    assert "kept fp16: " in report.summary() and gaussian.name in report.summary()


def test_weights_coremltools_cannot_compress_are_reported_with_the_reason() -> None:
    small = (rng.standard_normal((16, 64)) / 8).astype(np.float16)  # 1,024 values
    program = anekit.compile(lambda x: x @ small.T, X[:, :64], compress="palettize4")
    program.to_mlmodel()
    assert program.compression_report is not None
    (outcome,) = program.compression_report.weights
    assert outcome.kept_because == f"1024 values, not more than {WEIGHT_THRESHOLD}"
    blocks = anekit.compile(_dense, X, compress="int4-b48")  # 128 inputs: no blocks of 48
    blocks.to_mlmodel()
    assert blocks.compression_report is not None
    (outcome,) = blocks.compression_report.weights
    assert outcome.kept_because == "axis 1 of (64, 128, 1, 1) is not divisible by the block size 48"
    assert _constexprs(blocks) == []


def test_an_ios18_format_on_an_older_opset_is_a_named_error() -> None:
    program = anekit.compile(_dense, X, compress="int4-b32", deployment_target="macOS13")
    with pytest.raises(ProgramError, match=r"int4-b32 .* needs the iOS18 / macOS15 opset"):
        program.to_mlmodel()


def test_an_ios16_palette_runs_in_the_simulator() -> None:
    """A package of the iOS16 opset holds the iOS16 constexpr_lut_to_dense (a flat
    lut, packed indices): the simulator decompresses it too."""
    older = anekit.compile(_dense, X, compress="palettize4", deployment_target="macOS13")
    newer = anekit.compile(_dense, X, compress="palettize4")
    (op,) = _constexprs(older)
    assert op.opset_version == anekit._coremltools.ct.target.iOS16
    np.testing.assert_array_equal(
        np.asarray(decompressed(op)).reshape(GAUSSIAN.shape),
        np.asarray(decompressed(_constexprs(newer)[0])).reshape(GAUSSIAN.shape),
    )
    np.testing.assert_array_equal(older(X, backend="sim"), newer(X, backend="sim"))


def test_a_saved_compressed_program_loads_and_runs_the_same(tmp_path: Path) -> None:
    program = anekit.compile(_dense, X, compress="palettize4")
    path = program.save(tmp_path / "dense.mlpackage")
    loaded = anekit.load(path)
    ops = {op.op_type for op in loaded.program.functions["main"].operations}
    assert "constexpr_lut_to_dense" in ops
    np.testing.assert_array_equal(loaded(X, backend="sim"), program(X, backend="sim"))
    import json

    from anekit._mlpackage import read_spec

    spec, _ = read_spec(path)
    stored = json.loads(spec.description.metadata.userDefined[METADATA_KEY])
    assert stored == {"spec": "palettize4", "bound": MAX_ERROR, "kept_fp16": {}}


def test_onnx_runtime_refuses_compressed_weights() -> None:
    program = anekit.compile(_dense, X, compress="int8")
    with pytest.raises(ProgramError, match=r"compressed weights \(int8\) are a Core ML package"):
        program(X, backend="onnx")


def test_compress_model_without_compression_returns_the_model() -> None:
    model = anekit.compile(_dense, X).to_mlmodel()
    same, report = compress_model(model, "fp16")
    assert same is model and report.weights == []
